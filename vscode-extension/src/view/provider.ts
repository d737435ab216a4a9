// The "Spark executors" view: model nodes (src/view/model.ts) as
// TreeItems. Redraws are batched (at most one per 250 ms) and durations
// tick once a second only while the view is visible and shows one.

import * as vscode from 'vscode';
import { Batcher, Ticker } from '../batch';
import { workerTooltip } from './format';
import { buildTree, type Node, type TreeModel, type WorkerNode } from './model';
import type { WorkersWatch } from './watch';

const ICONS: Record<WorkerNode['state'], [string, string | undefined]> = {
  stopped: ['debug-pause', 'debugIcon.pauseForeground'],
  running: ['play', 'debugIcon.startForeground'],
  idle: ['circle-outline', undefined],
  finished: ['pass', undefined],
  failed: ['error', 'errorForeground'],
};

export class ExecutorsView implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private model: TreeModel = { roots: [], needsTick: false, rows: 0 };
  private rootId = '';
  private readonly emitter = new vscode.EventEmitter<Node | undefined | void>();
  readonly onDidChangeTreeData = this.emitter.event;
  private readonly batcher = new Batcher(() => this.rebuild(), 250);
  private readonly ticker = new Ticker(() => this.batcher.schedule(), 1000);
  private readonly view: vscode.TreeView<Node>;
  private readonly subs: vscode.Disposable[] = [];

  constructor(private readonly watch: WorkersWatch) {
    this.view = vscode.window.createTreeView('sparkdap.executors', { treeDataProvider: this, showCollapseAll: true });
    this.subs.push(
      this.view,
      this.view.onDidChangeVisibility((e) => {
        if (e.visible) {
          this.batcher.schedule();
        } else {
          this.ticker.set(false);
        }
      }),
    );
  }

  /** Something changed: redraw, batched. */
  invalidate(): void {
    this.batcher.schedule();
  }

  private rebuild(): void {
    const cur = this.watch.current();
    const now = Date.now();
    this.rootId = cur?.entry.id ?? '';
    this.model = buildTree(cur?.entry.answer, { now, stoppedSince: (w) => cur?.entry.stops.sinceOf(w) });
    this.ticker.set(this.model.needsTick && this.view.visible);
    const stopped = cur?.entry.answer?.counts?.stopped ?? 0;
    this.view.badge = stopped > 0 ? { value: stopped, tooltip: `${stopped} stopped` } : undefined;
    this.view.description = cur && this.watch.rootCount() > 1 ? cur.session.name : undefined;
    this.view.message = cur && !cur.entry.answer ? 'Waiting for the list of workers…' : undefined;
    this.emitter.fire();
  }

  getChildren(node?: Node): Node[] {
    if (!node) {
      return this.model.roots;
    }
    return node.kind === 'executor' || node.kind === 'stage' ? node.children : [];
  }

  getTreeItem(node: Node): vscode.TreeItem {
    const collapsible =
      node.kind === 'executor' || node.kind === 'stage'
        ? vscode.TreeItemCollapsibleState.Expanded
        : vscode.TreeItemCollapsibleState.None;
    const item = new vscode.TreeItem(node.label, collapsible);
    // Ids tie the row to its root session, so expansion state survives redraws.
    item.id = `${this.rootId}/${node.id}`;
    item.description = node.description;
    switch (node.kind) {
      case 'header':
        item.iconPath = new vscode.ThemeIcon('pulse');
        item.tooltip = node.tooltip;
        item.contextValue = ';header;';
        break;
      case 'executor':
        item.iconPath = new vscode.ThemeIcon('server');
        item.tooltip = node.tooltip;
        item.contextValue = ';executor;';
        break;
      case 'stage':
        item.iconPath = new vscode.ThemeIcon('layers');
        item.contextValue = node.contextValue;
        break;
      case 'worker': {
        const [icon, color] = ICONS[node.state];
        item.iconPath = new vscode.ThemeIcon(icon, color ? new vscode.ThemeColor(color) : undefined);
        // The tooltip is built on hover (resolveTreeItem): building 1,000 of
        // them per redraw cost more than the rest of the tree.
        item.contextValue = node.contextValue;
        if (node.state === 'stopped' && node.worker.executor) {
          item.command = { command: 'sparkdap.reveal', title: 'Reveal', arguments: [node] };
        }
        break;
      }
      case 'more':
        item.iconPath = new vscode.ThemeIcon('ellipsis');
        item.tooltip = node.tooltip;
        break;
    }
    return item;
  }

  resolveTreeItem(item: vscode.TreeItem, node: Node): vscode.TreeItem {
    if (node.kind === 'worker') {
      item.tooltip = workerTooltip(node.worker, Date.now(), node.stoppedSince);
    }
    return item;
  }

  dispose(): void {
    this.batcher.dispose();
    this.ticker.dispose();
    this.emitter.dispose();
    for (const d of this.subs) {
      d.dispose();
    }
  }
}
