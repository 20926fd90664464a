/** One notebook on a GPU session kernel and the lease it follows (see sessions.ts). */

import { ISessionContext, Notification } from '@jupyterlab/apputils';
import type { DocumentRegistry } from '@jupyterlab/docregistry';

import { isFinal } from './lifecycle';
import { SessionBar } from './sessionbar';
import {
  ISessionRun,
  devicesText,
  endedText,
  idleWarningText,
  isWaiting,
  leaseActions,
  queuedText,
  sessionBarView,
  shouldConnect,
  specOfRun
} from './sessionmodel';
import type { INotebookLike, SessionsController } from './sessions';
import type { IExplain, IStatusEvent } from './types';

export const STARTING = new Set(['starting', 'initializing', 'restarting']);
const TOOLBAR_ITEM = 'gpuplat-session';

/** One notebook and the lease of its session kernel. */
export class NotebookSession {
  constructor(
    private _ctrl: SessionsController,
    panel: INotebookLike,
    private _context: DocumentRegistry.IContext<DocumentRegistry.IModel>
  ) {
    this.bar = new SessionBar({
      cancel: () => this._act(id => this._ctrl.service.stop(id)),
      keep: () => this._act(id => this._ctrl.service.keepalive(id)),
      why: () => this.run && this._ctrl.openRun(this.run.id)
    });
    // Before the spacer: the toolbar moves what does not fit, from its right end, into its "…" menu.
    if (!panel.toolbar.insertBefore('spacer', TOOLBAR_ITEM, this.bar)) {
      panel.toolbar.addItem(TOOLBAR_ITEM, this.bar);
    }
    const sc = this._sc;
    sc.kernelChanged.connect(this._onKernel, this);
    sc.statusChanged.connect(this.update, this);
    sc.connectionStatusChanged.connect(this.update, this);
    _context.pathChanged.connect(this.update, this);
    void _context.ready.then(() => this.update());
    this.update();
  }

  readonly bar: SessionBar;
  run: ISessionRun | null = null;

  get name(): string {
    return this._context.path.split('/').pop() ?? this._context.path;
  }

  /** A session kernel is (being) started here and its lease is not known (or it ended). */
  get looking(): boolean {
    return this._specName() !== null && (this.run === null || isFinal(this.run.status));
  }

  /** The lease is known and not over. */
  get followsLease(): boolean {
    return this.run !== null && !isFinal(this.run.status);
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    window.clearInterval(this._ticker);
    this.bar.dispose();
  }

  /** The notebook's kernel or spec changed: re-render; look for the lease; connect if due. */
  update(): void {
    if (this._disposed) {
      return;
    }
    const spec = this._specName();
    if (spec !== null) {
      this._lastSpec = spec;
    }
    if (spec !== null && this._askedFor !== this._context.path && (this.run === null || isFinal(this.run.status))) {
      this._askedFor = this._context.path;
      void this._find();
    }
    this._render();
    this._maybeConnect();
  }

  adoptFrom(runs: ISessionRun[]): void {
    if (!this.looking) {
      return;
    }
    const mine = runs.find(r => r.session?.notebook === this._context.path && r.id !== this.run?.id);
    if (mine) {
      this._adopt(mine);
    }
  }

  resync(): void {
    if (this.run && !isFinal(this.run.status)) {
      this._refresh();
    } else if (this.looking) {
      this._askedFor = null;
      this.update();
    }
  }

  onEvent(ev: IStatusEvent): void {
    const run = this.run;
    if (!run || (isFinal(run.status) && ev.run_id !== run.id)) {
      return;
    }
    const actions = leaseActions(ev, run.id, run.queue, run.status);
    if (ev.run_id === run.id) {
      // Shown at once; the re-read fills in the rest (devices, the kernel's state).
      const devices = (ev.details?.devices as number[] | undefined) ?? run.devices;
      this.run = { ...run, status: ev.status, reason: ev.reason, message: ev.message, devices };
    }
    for (const a of actions) {
      switch (a) {
        case 'refresh':
          this._refresh();
          break;
        case 'explain':
          this._refreshExplain();
          break;
        case 'idleWarning':
          this._idleWarning((ev.details?.deadline as number | undefined) ?? null);
          break;
        case 'idleCleared':
          this._clearIdle();
          break;
        case 'admitted':
          this._admitted();
          break;
        case 'ended':
          this._ended();
          break;
      }
    }
    this._render();
    this._maybeConnect();
  }

  // ---- the lease ---------------------------------------------------------------------------
  private async _find(): Promise<void> {
    try {
      const runs = await this._ctrl.service.sessions(this._context.path);
      this.adoptFrom(runs);
    } catch {
      // not reachable now: the stream's reconnect resyncs
    }
  }

  private _adopt(run: ISessionRun): void {
    this._clearIdle();
    this.run = run;
    this.explain = null;
    this._waitingNote = null;
    this._endNote = null;
    this._render();
    this._ctrl.dismissStale();
    if (isWaiting(run.status)) {
      this._refreshExplain();
    } else if (run.session?.idle_deadline && run.reason === 'IdleWarning') {
      this._idleWarning(run.session.idle_deadline);
    }
    this._maybeConnect();
  }

  private _refresh(): void {
    const run = this.run;
    if (!run) {
      return;
    }
    if (this._reading) {
      this._rereadRun = true;
      return;
    }
    this._reading = true;
    this._ctrl.service
      .getRun(run.id)
      .then(r => {
        if (this.run?.id === r.id) {
          this.run = r;
          if (isWaiting(r.status)) {
            this._refreshExplain();
          }
          this._render();
          this._maybeConnect();
        }
      })
      .catch(() => undefined)
      .finally(() => {
        this._reading = false;
        if (this._rereadRun) {
          this._rereadRun = false;
          this._refresh();
        }
      });
  }

  private _refreshExplain(): void {
    const run = this.run;
    if (!run || !isWaiting(run.status)) {
      return;
    }
    if (this._explaining) {
      this._reexplain = true;
      return;
    }
    this._explaining = true;
    this._ctrl.service
      .explain(run.id)
      .then(ex => {
        if (this.run?.id === ex.run_id && isWaiting(this.run.status)) {
          this.explain = ex;
          this._render();
        }
      })
      .catch(() => undefined)
      .finally(() => {
        this._explaining = false;
        if (this._reexplain) {
          this._reexplain = false;
          this._refreshExplain();
        }
      });
  }

  private _act(call: (id: string) => Promise<unknown>): void {
    const run = this.run;
    if (!run) {
      return;
    }
    call(run.id)
      .then(() => this._refresh())
      .catch(error => Notification.error(`GPU session ${run.id}: ${(error as Error).message}`, { autoClose: 8000 }));
  }

  // ---- the notebook's kernel -----------------------------------------------------------------
  private get _sc(): ISessionContext {
    return this._context.sessionContext;
  }

  private _onKernel(): void {
    const kernel = this._sc.session?.kernel;
    if (!kernel && this.followsLease) {
      this._ctrl.dismissStale(); // a start that gave up waiting, or its kernel picker
    }
    if (kernel && this.run && isFinal(this.run.status) && this._specName() !== null) {
      this._askedFor = null; // a new session kernel after the lease ended: a new lease
    }
    this.update();
  }

  /** The session kernelspec the notebook is on, or is starting, or prefers; null if none. */
  private _specName(): string | null {
    const specs = this._ctrl.specs();
    const names = new Set(specs.map(s => s.name));
    const sc = this._sc;
    const kernel = sc.session?.kernel;
    if (kernel) {
      return names.has(kernel.name) ? kernel.name : null;
    }
    if (STARTING.has(sc.kernelDisplayStatus)) {
      const pending = specs.find(s => s.displayName === sc.kernelDisplayName);
      if (pending) {
        return pending.name;
      }
    }
    const preferred = sc.kernelPreference.name;
    return preferred && names.has(preferred) ? preferred : null;
  }

  private _kernelState(): { hasKernel: boolean; starting: boolean } {
    const sc = this._sc;
    return { hasKernel: !!sc.session?.kernel, starting: STARTING.has(sc.kernelDisplayStatus) };
  }

  /** Admitted while the notebook has no kernel (its start gave up waiting): start it again. */
  private _maybeConnect(): void {
    if (!shouldConnect(this.run, this._kernelState(), this._triedFor) || !this.run) {
      return;
    }
    const name = this._lastSpec ?? specOfRun(this._ctrl.specs(), this.run)?.name;
    if (!name) {
      return;
    }
    this._triedFor = this.run.id;
    this._sc.changeKernel({ name }).catch(error => console.warn(`gpuplat: ${this.name}: kernel start failed`, error));
  }

  // ---- notifications ----------------------------------------------------------------------
  private _render(): void {
    const run = this.run;
    const spec = run ? specOfRun(this._ctrl.specs(), run) : null;
    const submitting = run === null && this._specName() !== null && STARTING.has(this._sc.kernelDisplayStatus);
    const view = sessionBarView({
      run,
      explain: this.explain,
      spec,
      submitting,
      idleDeadline: this._idleDeadline,
      now: this._ctrl.now()
    });
    this.bar.render(view);
    // Once explain answered: a toast updated right after it is first shown may keep its
    // first text (JupyterLab loads its toast library on the first toast).
    if (run && isWaiting(run.status) && this.explain !== null) {
      this._noteWaiting(run);
    }
  }

  private _noteWaiting(run: ISessionRun): void {
    const message = `GPU session for ${this.name}: ${queuedText(run, this.explain)}`;
    const actions: Notification.IAction[] = [
      { label: 'Cancel', caption: `Stop session ${run.id}: it leaves the queue`, callback: () => this._act(id => this._ctrl.service.stop(id)) },
      { label: 'Why?', caption: `Show ${run.id} in the GPU platform sidebar`, callback: () => this._ctrl.openRun(run.id) }
    ];
    if (this._waitingNote === null) {
      this._waitingNote = Notification.emit(message, 'in-progress', { autoClose: false, actions });
      this._waitingText = message;
    } else if (message !== this._waitingText) {
      this._waitingText = message;
      Notification.update({ id: this._waitingNote, message, type: 'in-progress', autoClose: false, actions });
    }
  }

  private _admitted(): void {
    if (this._waitingNote !== null && this.run) {
      Notification.update({
        id: this._waitingNote,
        message: `GPU session for ${this.name}: admitted on ${devicesText(this.run.devices)}`,
        type: 'success',
        autoClose: 5000,
        actions: []
      });
      this._waitingNote = null;
    }
  }

  private _idleWarning(deadline: number | null): void {
    const run = this.run;
    if (!run) {
      return;
    }
    this._idleDeadline = deadline;
    const message = `${idleWarningText(deadline, this._ctrl.now())} (${this.name})`;
    const actions: Notification.IAction[] = [
      { label: 'Keep session', caption: 'Start the idle clock again', callback: () => this._act(id => this._ctrl.service.keepalive(id)) }
    ];
    if (this._idleNote !== null) {
      Notification.dismiss(this._idleNote);
    }
    this._idleNote = Notification.warning(message, { autoClose: false, actions });
    this._idleText = message;
    window.clearInterval(this._ticker);
    this._ticker = window.setInterval(() => this._render(), 1000); // the toolbar's countdown
  }

  private _clearIdle(): void {
    this._idleDeadline = null;
    window.clearInterval(this._ticker);
    if (this._idleNote !== null) {
      Notification.dismiss(this._idleNote);
      this._idleNote = null;
    }
  }

  private _ended(): void {
    const run = this.run;
    if (!run) {
      return;
    }
    this._idleDeadline = null;
    window.clearInterval(this._ticker);
    if (this._idleNote !== null) {
      // It stays in the notification list (it said what was coming), without its action.
      Notification.update({ id: this._idleNote, message: this._idleText, type: 'warning', autoClose: 5000, actions: [] });
      this._idleNote = null;
    }
    if (this._endNote !== null) {
      return;
    }
    const message = `${endedText(run)} (${this.name})`;
    const type = run.status === 'failed' ? 'error' : run.reason === 'IdleTimeout' ? 'warning' : 'info';
    const actions: Notification.IAction[] = [
      { label: 'Why?', caption: `Show ${run.id} in the GPU platform sidebar`, callback: () => this._ctrl.openRun(run.id) }
    ];
    if (this._waitingNote !== null) {
      Notification.update({ id: this._waitingNote, message, type, autoClose: false, actions });
      this._endNote = this._waitingNote;
      this._waitingNote = null;
    } else {
      this._endNote = Notification.emit(message, type, { autoClose: false, actions });
    }
  }

  explain: IExplain | null = null;
  private _disposed = false;
  private _lastSpec: string | null = null;
  private _askedFor: string | null = null;
  private _triedFor: string | null = null;
  private _reading = false;
  private _rereadRun = false;
  private _explaining = false;
  private _reexplain = false;
  private _idleDeadline: number | null = null;
  private _ticker = 0;
  private _waitingNote: string | null = null;
  private _waitingText = '';
  private _idleNote: string | null = null;
  private _idleText = '';
  private _endNote: string | null = null;
}
