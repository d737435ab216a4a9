// A debug adapter that is a TCP connection to a DAP server, made with
// retries. `sparkdap replay --debug` starts Python, which then starts
// debugpy's listener: VS Code's own DebugAdapterServer connects once, at
// once, and fails while the listener is not up yet. A probe connection
// cannot be used to wait instead: debugpy waits for one client and would
// take the probe for it. So the replay session's adapter is this one,
// which VS Code runs inline (vscode.DebugAdapterInlineImplementation) and
// which queues VS Code's first messages until the connection is made.
// No vscode import: src/debug/provider.ts wraps it.

import * as net from 'node:net';

export interface DapMessage {
  seq: number;
  type: string;
  command?: string;
  event?: string;
  [key: string]: unknown;
}

export interface Disposable {
  dispose(): void;
}

/** Shaped like vscode.Event, so the wrapper can pass it on as is. */
export type Listener<T> = (e: T) => unknown;
export type Event<T> = (listener: Listener<T>, thisArgs?: unknown, disposables?: Disposable[]) => Disposable;

export class Emitter<T> {
  private readonly listeners = new Set<Listener<T>>();

  readonly event: Event<T> = (listener, thisArgs, disposables) => {
    const l: Listener<T> = thisArgs ? listener.bind(thisArgs) : listener;
    this.listeners.add(l);
    const d = { dispose: () => void this.listeners.delete(l) };
    disposables?.push(d);
    return d;
  };

  fire(e: T): void {
    for (const l of [...this.listeners]) {
      l(e);
    }
  }

  dispose(): void {
    this.listeners.clear();
  }
}

/** Frames DAP messages: a Content-Length header, a blank line, the JSON body. */
export function encodeMessage(m: object): Buffer {
  const body = Buffer.from(JSON.stringify(m), 'utf8');
  return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, 'ascii'), body]);
}

/** Reads DAP frames from a byte stream that may split or merge them anywhere. */
export class MessageReader {
  private buf: Buffer = Buffer.alloc(0);

  constructor(
    private readonly onMessage: (m: DapMessage) => void,
    private readonly maxBytes = 64 << 20,
  ) {}

  push(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    for (;;) {
      const end = this.buf.indexOf('\r\n\r\n');
      if (end < 0) {
        if (this.buf.length > 8192) {
          throw new Error('DAP header too long');
        }
        return;
      }
      const header = this.buf.subarray(0, end).toString('ascii');
      const m = /Content-Length:\s*(\d+)/i.exec(header);
      if (!m) {
        throw new Error('DAP header without Content-Length');
      }
      const len = Number(m[1]);
      if (len > this.maxBytes) {
        throw new Error(`DAP message of ${len} bytes is over ${this.maxBytes}`);
      }
      const start = end + 4;
      if (this.buf.length < start + len) {
        return;
      }
      const body = this.buf.subarray(start, start + len).toString('utf8');
      this.buf = this.buf.subarray(start + len);
      this.onMessage(JSON.parse(body) as DapMessage);
    }
  }
}

export interface SocketAdapterOptions {
  /** Keep trying this long (replay needs a moment to listen). */
  retryMs?: number;
  intervalMs?: number;
  connect?: (port: number, host: string) => net.Socket;
  now?: () => number;
}

export class SocketDebugAdapter {
  private readonly emitter = new Emitter<DapMessage>();
  readonly onDidSendMessage: Event<DapMessage> = this.emitter.event;
  private socket: net.Socket | undefined;
  private queue: DapMessage[] = [];
  private disposed = false;
  private ended = false;
  private seq = 1;
  private readonly started: number;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly o: SocketAdapterOptions = {},
  ) {
    this.started = (o.now ?? Date.now)();
    this.attempt();
  }

  private attempt(): void {
    if (this.disposed) {
      return;
    }
    const s = (this.o.connect ?? ((p, h) => net.connect(p, h)))(this.port, this.host);
    let connected = false;
    let failed = false;
    s.once('connect', () => {
      connected = true;
      if (this.disposed) {
        s.destroy();
        return;
      }
      this.socket = s;
      const reader = new MessageReader((m) => this.emitter.fire(m));
      s.on('data', (b: Buffer) => {
        try {
          reader.push(b);
        } catch (e) {
          this.fail(`bad data from ${this.host}:${this.port}: ${(e as Error).message}`);
          s.destroy();
        }
      });
      s.on('close', () => this.end());
      for (const m of this.queue) {
        s.write(encodeMessage(m));
      }
      this.queue = [];
    });
    s.on('error', (e: Error) => {
      if (connected || failed) {
        return; // Connected: 'close' follows and ends the session.
      }
      failed = true;
      s.destroy();
      const waited = (this.o.now ?? Date.now)() - this.started;
      if (waited >= (this.o.retryMs ?? 20000)) {
        this.fail(
          `could not connect to ${this.host}:${this.port} within ${Math.round((this.o.retryMs ?? 20000) / 1000)} s (${e.message}); ` +
            'see the replay terminal for why it is not listening',
        );
        return;
      }
      setTimeout(() => this.attempt(), this.o.intervalMs ?? 250);
    });
  }

  /** Answers every queued request with an error and ends the session: VS Code shows the message. */
  private fail(message: string): void {
    for (const m of this.queue) {
      if (m.type === 'request') {
        this.emitter.fire({
          seq: this.seq++,
          type: 'response',
          request_seq: m.seq,
          command: m.command,
          success: false,
          message,
          body: { error: { id: 1, format: message, showUser: true } },
        });
      }
    }
    this.queue = [];
    this.end();
  }

  private end(): void {
    if (this.ended || this.disposed) {
      return;
    }
    this.ended = true;
    this.emitter.fire({ seq: this.seq++, type: 'event', event: 'terminated' });
  }

  handleMessage(m: DapMessage): void {
    if (this.disposed || this.ended) {
      return;
    }
    if (this.socket) {
      this.socket.write(encodeMessage(m));
    } else {
      this.queue.push(m);
    }
  }

  dispose(): void {
    this.disposed = true;
    this.socket?.destroy();
    this.emitter.dispose();
  }
}
