/**
 * GPU sessions where the user is: each notebook on a gpuplat session kernel gets a toolbar
 * item and notifications that follow its lease live from the platform's event stream
 * (queued — position and why, with Cancel and Why?; admitted on GPU n; the idle warning
 * with "Keep session"; the end and why).
 *
 * A kernel start that gave up waiting ("Waiting for a GPU: …", the provisioner's bounded
 * wait) leaves the lease queued and the notebook without a kernel; when the stream says the
 * lease is admitted, the notebook starts its kernel again by itself and attaches to it.
 * Nothing here polls: every re-read follows an event (or the stream reconnecting).
 *
 * A lease starts only when the user asks (a kernel choice, Start GPU session, the bar's
 * "Start a new session", the answer to the prompt a cell run gets): a notebook reopened or
 * restored on a session kernel asks the server for its newest lease first and, if it ended,
 * says so instead of leasing again (see notebooksession.ts).
 */

import { Dialog } from '@jupyterlab/apputils';
import type { DocumentRegistry } from '@jupyterlab/docregistry';
import type { KernelSpec } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';
import { Widget } from '@lumino/widgets';

import { NotebookSession } from './notebooksession';
import { OneAtATime } from '../../models/coalesce';
import type { SessionSource } from '../../models/sessionsource';
import { ISessionSpec, LAUNCH_WAIT_PREFIX, noSpecMessage, sessionSpecs, specFor } from '../../models/sessionmodel';
import type { IEtaEvent, IStatusEvent } from '../../api/types';

/** What a notebook panel offers us (DocumentWidget: a toolbar we add an item to). */
export interface INotebookLike {
  readonly toolbar: { insertBefore(at: string, name: string, w: Widget): boolean; addItem(name: string, w: Widget): boolean };
  readonly disposed: { connect(fn: () => void): boolean };
}

export interface ISessionsOptions {
  source: SessionSource;
  kernelspecs: KernelSpec.IManager;
  openRun: (id: string) => void;
  /** Client clock minus server clock, in seconds. */
  clockOffset: () => number;
}


export class SessionsController {
  constructor(private _opts: ISessionsOptions) {
    _opts.kernelspecs.specsChanged.connect(() => this._each(n => n.update()));
    // The provisioner's "Waiting for a GPU" error (and the kernel picker JupyterLab opens
    // after it) would block the page with a modal; the notebook's toolbar and notification
    // say the same, live, and the notebook connects by itself when admitted.
    Dialog.tracker.widgetAdded.connect((_, dialog) => void (dialog.ready ?? Promise.resolve()).then(() => this._maybeDismiss(dialog)));
  }

  /** The sessions' data source (each notebook's toolbar calls it). */
  get source(): SessionSource {
    return this._opts.source;
  }

  /** Whose sessions these are; empty until `whoami` answered. */
  set user(name: string) {
    this._user = name;
    this._userKnown(name);
  }

  /** Whose sessions these are, once `whoami` answered. */
  whenUser(): Promise<string> {
    return this._userPromise;
  }

  get user(): string {
    return this._user;
  }

  /** The session kernelspecs the server offers now. */
  specs(): ISessionSpec[] {
    return sessionSpecs(this._opts.kernelspecs.specs?.kernelspecs);
  }

  /** The kernelspec for `preset` in `project`, refreshing the specs first (they follow the config). */
  async specFor(preset: string, project: string): Promise<ISessionSpec> {
    await this._opts.kernelspecs.refreshSpecs();
    const specs = this.specs();
    const spec = specFor(specs, preset, project);
    if (!spec) {
      throw new Error(noSpecMessage(specs, preset, project));
    }
    return spec;
  }

  /** Server time now (seconds), from the client clock and the measured offset. */
  now(): number {
    return Date.now() / 1000 - this._opts.clockOffset();
  }

  openRun(id: string): void {
    this._opts.openRun(id);
  }

  /** Whether a notebook follows this run (the generic run notifications leave it to us). */
  owns(runId: string): boolean {
    for (const n of this._notebooks) {
      if (n.run?.id === runId) {
        return true;
      }
    }
    return false;
  }

  /** The document registry's widget extension for notebooks. */
  createNew(panel: INotebookLike, context: DocumentRegistry.IContext<DocumentRegistry.IModel>): IDisposable {
    const n = new NotebookSession(this, panel, context);
    this._notebooks.add(n);
    const gone = {
      isDisposed: false,
      dispose: () => {
        gone.isDisposed = true;
        this._notebooks.delete(n);
        n.dispose();
      }
    };
    panel.disposed.connect(() => gone.dispose());
    return gone;
  }

  onEvent(ev: IStatusEvent): void {
    this._each(n => n.onEvent(ev));
    if (ev.user === this._user && !this._seen.has(ev.run_id)) {
      // A run of mine not seen before: maybe the lease a notebook's kernel start just made.
      this._seen.add(ev.run_id);
      if ([...this._notebooks].some(n => n.looking)) {
        this.discover();
      }
    }
  }

  /** Start estimates moved: a notebook whose waiting lease is named says the new one. */
  onEta(ev: IEtaEvent): void {
    this._each(n => n.onEta(ev));
  }

  /** The stream (re)connected: events may have been missed, re-read what we follow. */
  onReady(): void {
    this._each(n => n.resync());
  }

  /** Find the leases of notebooks that wait for one (one request, however many ask). */
  discover(): void {
    this._discover.request();
  }

  /** Dismiss the dialogs a notebook's wait makes stale (e.g. opened before its lease was known). */
  dismissStale(): void {
    Dialog.tracker.forEach(d => {
      if (d.isAttached) {
        this._maybeDismiss(d);
      }
    });
  }

  private _maybeDismiss(dialog: Dialog<unknown>): void {
    // Only the body: a string title renders through React, after `ready`.
    const body = dialog.node.querySelector('.jp-Dialog-body');
    const text = body?.textContent ?? '';
    if (text.replace(/^\s+/, '').startsWith(LAUNCH_WAIT_PREFIX)) {
      dialog.reject();
      return;
    }
    // The kernel picker JupyterLab opens after that error ('Select kernel for: "x.ipynb"'),
    // for a notebook whose lease we follow.
    const picker = !!body?.querySelector('select');
    if (!picker) {
      return;
    }
    const notebooks = [...this._notebooks].filter(n => text.includes(`"${n.name}"`));
    if (notebooks.some(n => n.followsLease)) {
      dialog.reject();
      return;
    }
    // A cell run in a notebook whose session ended asks for a kernel (JupyterLab's executor
    // opens the picker when the notebook does not start one by itself): ask our question instead.
    const ended = notebooks.find(n => n.offering && !n.pickerAllowed);
    if (ended) {
      dialog.reject();
      void ended.promptNewSession();
    }
  }

  private _each(fn: (n: NotebookSession) => void): void {
    for (const n of this._notebooks) {
      fn(n);
    }
  }

  private _user = '';
  private _userKnown: (name: string) => void = () => undefined;
  private _userPromise = new Promise<string>(resolve => (this._userKnown = resolve));
  private _notebooks = new Set<NotebookSession>();
  private _seen = new Set<string>();
  private _discover = new OneAtATime(() =>
    this._opts.source.sessions().then(runs => {
      for (const r of runs) {
        this._seen.add(r.id);
      }
      this._each(n => n.adoptFrom(runs));
    }) // failures: the sidebar shows connection problems
  );
}
