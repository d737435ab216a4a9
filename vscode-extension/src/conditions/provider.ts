// Completion of sparkdap.partition & co. in the breakpoint condition
// editor: a provider for Python files, answering only where the
// breakpoint widget asks (see src/conditions/items.ts for why that is
// column 1 of the breakpoint's line).

import * as vscode from 'vscode';
import { CONDITION_FIELDS, shouldOffer } from './items';

export function registerConditionCompletions(): vscode.Disposable {
  return vscode.languages.registerCompletionItemProvider(
    { language: 'python' },
    {
      provideCompletionItems(doc, pos) {
        if (!vscode.workspace.getConfiguration('sparkdap').get<boolean>('conditionCompletions', true)) {
          return undefined;
        }
        if (!shouldOffer(pos.character, doc.lineAt(pos.line).text)) {
          return undefined;
        }
        return CONDITION_FIELDS.map((f) => {
          // Not a Snippet: the widget drops snippet items.
          const item = new vscode.CompletionItem(f.name, vscode.CompletionItemKind.Field);
          item.detail = `${f.type} · sparkdap task field`;
          item.documentation = new vscode.MarkdownString(
            `${f.doc}. Defined in tasks the sparkdap wrapper debugs, e.g. \`${f.name} == 7\` as a breakpoint condition.`,
          );
          item.sortText = `0${f.name}`;
          return item;
        });
      },
    },
  );
}
