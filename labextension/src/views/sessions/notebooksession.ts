/** One notebook on a GPU session kernel and the lease it follows (see sessions.ts). */

import { Dialog, ISessionContext, Notification, SessionContextDialogs, showDialog } from '@jupyterlab/apputils';
import type { DocumentRegistry } from '@jupyterlab/docregistry';

import { isFinal } from '../../models/lifecycle';
import { SessionLease } from '../../models/sessionlease';
import { KernelGate, STARTING } from './kernelgate';
import { SessionBar } from './sessionbar';
import { SessionToast } from './sessiontoast';
import {
  ISessionNotice,
  ISessionRun,
  NoticeStage,
  devicesKnown,
  etaActions,
  isAdmitted,
  isSessionKernelName,
  isWaiting,
  leaseActions,
  newSessionPrompt,
  restoreDecision,
  sessionBarView,
  sessionNotice,
  shouldConnect,
  specOfRun
} from '../../models/sessionmodel';
import type { INotebookLike, SessionsController } from './sessions';
import type { IEtaEvent, IExplain, IStatusEvent } from '../../api/types';

export { STARTING }; // its home is kernelgate.ts
const TOOLBAR_ITEM = 'gpuplat-session';

/** One notebook and the lease of its session kernel. */
export class NotebookSession {
  constructor(
    private _ctrl: SessionsController,
    panel: INotebookLike,
    private _context: DocumentRegistry.IContext<DocumentRegistry.IModel>
  ) {
    this._lease = new SessionLease(_ctrl.source, { read: r => this._onRead(r), explained: () => this._render() });
    this.bar = new SessionBar({
      start: () => this.startNew(),
      cancel: () => this._act(id => this._ctrl.source.stop(id)),
      keep: () => this._act(id => this._ctrl.source.keepalive(id)),
      why: () => this.run && this._ctrl.openRun(this.run.id)
    });
    // Before the spacer: the toolbar moves what does not fit, from its right end, into its "…" menu.
    if (!panel.toolbar.insertBefore('spacer', TOOLBAR_ITEM, this.bar)) {
      panel.toolbar.addItem(TOOLBAR_ITEM, this.bar);
    }
    const sc = this._sc;
    // A kernel named when the notebook was opened (launcher, Start GPU session) is the user's
    // choice; otherwise the kernel comes from the notebook's metadata and waits for the gate.
    this._chosen = isSessionKernelName(sc.kernelPreference.name, []);
    // Before the context's own `ready` continuation reads the preference and starts a kernel.
    void _context.ready.then(() => this._gate());
    sc.kernelChanged.connect(this._onKernel, this);
    sc.statusChanged.connect(this.update, this);
    sc.connectionStatusChanged.connect(this.update, this);
    _context.pathChanged.connect(this._onMoved, this);
    _context.pathChanged.connect(this.update, this);
    void _context.ready.then(() => this.update());
    this.update();
  }

  readonly bar: SessionBar;

  /** The lease this notebook follows (null until one is found or started). */
  get run(): ISessionRun | null {
    return this._lease.run;
  }

  /** Why the lease waits, while it does. */
  get explain(): IExplain | null {
    return this._lease.explain;
  }

  get name(): string {
    return this._context.path.split('/').pop() ?? this._context.path;
  }

  /** A session kernel is (being) started here and its lease is not known (or it ended). */
  get looking(): boolean {
    return this._kernel.specName() !== null && (this.run === null || isFinal(this.run));
  }

  /** The lease is known and not over. */
  get followsLease(): boolean {
    return this.run !== null && !isFinal(this.run);
  }

  /** The lease ended and the notebook offers a new one (it leases only when asked). */
  get offering(): boolean {
    return this._kernel.held && this._offer && this.run !== null && isFinal(this.run);
  }

  /** The kernel picker the user asked for from our prompt: let it through. */
  get pickerAllowed(): boolean {
    return this._pickerAllowed;
  }

  /** The user asks for a new session: the notebook's session kernel starts (a new lease). */
  startNew(): void {
    const name = this._gpuSpec();
    if (!name) {
      return;
    }
    this._release();
    this._askedFor = null;
    this._render();
    this._kernel.start(name);
  }

  /** A cell was run in a notebook whose session ended: ask before leasing again. */
  async promptNewSession(): Promise<void> {
    if (this._prompting) {
      return;
    }
    this._prompting = true;
    try {
      const other = Dialog.createButton({ label: 'Choose another kernel…', accept: false, displayType: 'default' });
      const result = await showDialog({
        title: 'GPU session ended',
        body: newSessionPrompt(this.run),
        buttons: [Dialog.cancelButton(), other, Dialog.okButton({ label: 'Start a new GPU session' })]
      });
      if (result.button.accept) {
        this.startNew();
      } else if (result.button.label === other.label) {
        this._pickerAllowed = true;
        await new SessionContextDialogs().selectKernel(this._sc).finally(() => (this._pickerAllowed = false));
      }
    } finally {
      this._prompting = false;
    }
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    window.clearInterval(this._ticker);
    this._toast.dispose();
    this.bar.dispose();
  }

  /** Renamed or moved while it holds a lease: the lease follows (a reload finds it at the new path). */
  private _onMoved(): void {
    const id = this.run?.id;
    const path = this._context.path;
    this._lease.moveTo(path)?.then(
      moved => moved && this._render(),
      (e: Error) => console.warn(`gpuplat: session ${id} did not follow ${path}: ${e.message}`)
    );
  }

  /** The notebook's kernel or spec changed: re-render; look for the lease; connect if due. */
  update(): void {
    if (this._disposed) {
      return;
    }
    const spec = this._kernel.specName();
    if (spec !== null) {
      this._lastSpec = spec;
    }
    if (spec !== null && this._askedFor !== this._context.path && (this.run === null || isFinal(this.run))) {
      this._askedFor = this._context.path;
      void this._find();
    }
    this._render();
    this._maybeConnect();
  }

  adoptFrom(runs: ISessionRun[]): void {
    if (!this.looking || this.offering) {
      return;
    }
    const mine = runs.find(r => r.session?.notebook === this._context.path && r.id !== this.run?.id);
    if (mine) {
      this._adopt(mine);
    }
  }

  resync(): void {
    if (this.run && !isFinal(this.run)) {
      this._lease.refresh();
    } else if (this.looking) {
      this._askedFor = null;
      this.update();
    }
  }

  onEvent(ev: IStatusEvent): void {
    const run = this.run;
    if (!run || (isFinal(run) && ev.run_id !== run.id)) {
      return;
    }
    const actions = leaseActions(ev, run.id, run.queue, run);
    this._lease.showEvent(ev); // shown at once; the re-read fills in the rest
    for (const a of actions) {
      switch (a) {
        case 'refresh':
          this._lease.refresh();
          break;
        case 'explain':
          this._lease.refreshExplain();
          break;
        case 'idleWarning':
          this._idleWarning((ev.details?.deadline as number | undefined) ?? null, null);
          break;
        case 'idleCleared':
          this._clearIdle(true);
          break;
        case 'admitted':
          this._admitPending = true; // said once the re-read knows its devices
          break;
        case 'ended':
          this._ended();
          break;
      }
    }
    this._render();
    this._maybeConnect();
  }

  /** Start estimates moved: the lease's wait line (bar and notice) is read again when they name it. */
  onEta(ev: IEtaEvent): void {
    const run = this.run;
    if (run && etaActions(ev, run.id, run).includes('explain')) {
      this._lease.refreshExplain(); // its answer renders the bar and the notice (`explained`)
    }
  }

  // ---- the lease ---------------------------------------------------------------------------
  private async _find(): Promise<void> {
    try {
      const runs = await this._ctrl.source.sessions(this._context.path);
      this.adoptFrom(runs);
    } catch {
      // not reachable now: the stream's reconnect resyncs
    }
  }

  private _adopt(run: ISessionRun): void {
    this._clearIdle(false);
    this._lease.follow(run);
    this._admitPending = false;
    this._render();
    this._ctrl.dismissStale();
    if (isWaiting(run)) {
      this._lease.refreshExplain();
    } else if (run.session?.idle_deadline && run.reason === 'IdleWarning') {
      this._idleWarning(run.session.idle_deadline, run);
    }
    this._maybeConnect();
  }

  /** A re-read of the lease arrived: the idle warning's words; say it was admitted once its devices are known. */
  private _onRead(r: ISessionRun): void {
    if (r.reason === 'IdleWarning' && (this._idleWordsDue || this._idleDeadline !== null)) {
      this._idleRead(r);
    }
    if (this._admitPending && isAdmitted(r) && devicesKnown(r)) {
      this._admitPending = false;
      if (this._toast.stageOf(r.id) === 'waiting') {
        this._notify('admitted');
      }
    }
    this._render();
    this._maybeConnect();
  }

  private _act(call: (id: string) => Promise<unknown>): void {
    const run = this.run;
    if (!run) {
      return;
    }
    call(run.id)
      .then(() => this._lease.refresh())
      .catch(error => Notification.error(`GPU session ${run.id}: ${(error as Error).message}`, { autoClose: 8000 }));
  }

  // ---- the notebook's kernel -----------------------------------------------------------------
  private get _sc(): ISessionContext {
    return this._context.sessionContext;
  }

  private _onKernel(): void {
    const kernel = this._sc.session?.kernel;
    if (kernel && this._kernel.held) {
      this._release(); // a kernel the user chose (the picker, our prompt): no longer held
    }
    if (!kernel && this.followsLease) {
      this._ctrl.dismissStale(); // a start that gave up waiting, or its kernel picker
    }
    if (kernel && this.run && isFinal(this.run) && this._kernel.specName() !== null) {
      this._askedFor = null; // a new session kernel after the lease ended: a new lease
    }
    this.update();
  }

  /** Admitted while the notebook has no kernel (its start gave up waiting): start it again. */
  private _maybeConnect(): void {
    if (this._deciding || this.offering || !shouldConnect(this.run, this._kernel.kernelState(), this._triedFor) || !this.run) {
      return;
    }
    const name = this._lastSpec ?? specOfRun(this._ctrl.specs(), this.run)?.name;
    if (!name) {
      return;
    }
    this._triedFor = this.run.id;
    this._kernel.start(name);
  }

  // ---- notifications ----------------------------------------------------------------------
  private _render(): void {
    const run = this.run;
    const spec = run ? specOfRun(this._ctrl.specs(), run) : null;
    const submitting = run === null && this._kernel.specName() !== null && STARTING.has(this._sc.kernelDisplayStatus);
    const view = sessionBarView({
      run,
      explain: this.explain,
      spec,
      submitting,
      idleDeadline: this._idleDeadline,
      idleReason: this._idleReason,
      now: this._ctrl.now(),
      offer: this.offering
    });
    this.bar.render(view);
    this.bar.node.dataset.notebook = this._context.path; // which notebook's bar (it follows a rename)
    if (run && isWaiting(run) && this.explain !== null) {
      this._notify('waiting');
    }
  }

  /** The session's one notice, at `stage` (see SessionToast). */
  private _notify(stage: NoticeStage): void {
    const run = this.run;
    if (!run) {
      return;
    }
    const n = sessionNotice(stage, run, this.name, {
      explain: this.explain,
      idleDeadline: this._idleDeadline,
      idleReason: this._idleReason,
      now: this._ctrl.now()
    });
    if (n) {
      this._toast.show(n, run.id);
    }
  }

  private _actions(n: ISessionNotice, runId: string): Notification.IAction[] {
    return n.actions.map(a => {
      switch (a) {
        case 'cancel':
          return { label: 'Cancel', caption: `Stop session ${runId}: it leaves the queue`, callback: () => this._act(id => this._ctrl.source.stop(id)) };
        case 'keep':
          return { label: 'Keep session', caption: 'Start the idle clock again', callback: () => this._act(id => this._ctrl.source.keepalive(id)) };
        case 'why':
          return { label: 'Why?', caption: `Show ${runId} in the GPU platform sidebar`, callback: () => this._ctrl.openRun(runId) };
      }
    });
  }

  /**
   * The idle warning stands until `deadline`. `read`: a record read since the warning (its words are
   * said now); null: the warning's event, whose re-read (asked by the same event) brings the words —
   * the record held until then may say the kernel is busy.
   */
  private _idleWarning(deadline: number | null, read: ISessionRun | null): void {
    if (!this.run) {
      return;
    }
    this._idleDeadline = deadline;
    this._idleReason = null;
    this._idleWordsDue = true;
    if (read) {
      this._idleRead(read);
    }
    window.clearInterval(this._ticker);
    this._ticker = window.setInterval(() => this._render(), 1000); // the toolbar's countdown
  }

  /** A record read while the warning stands: the server's words for it (once due, the notice says them). */
  private _idleRead(r: ISessionRun): void {
    this._idleReason = r.session?.idle_reason ?? null; // none from an older server: the old words
    if (this._idleWordsDue) {
      this._idleWordsDue = false;
      this._notify('idle');
    }
  }

  /** The idle warning no longer stands; `kept`: say so where it was (the session was kept or used). */
  private _clearIdle(kept: boolean): void {
    this._idleDeadline = null;
    this._idleReason = null;
    this._idleWordsDue = false;
    window.clearInterval(this._ticker);
    if (kept && this._toast.stageOf(this.run?.id) === 'idle') {
      this._notify('kept');
    }
  }

  private _ended(): void {
    const run = this.run;
    if (!run) {
      return;
    }
    this._idleDeadline = null;
    this._idleReason = null;
    this._idleWordsDue = false;
    window.clearInterval(this._ticker);
    this._admitPending = false;
    // The notice it had (waiting, idle) ends with it; a session that ended quietly says so once.
    this._notify('ended');
    // From now on nothing leases again by itself: the bar offers a new session, a cell run asks.
    this._kernel.hold();
    this._offer = true;
    // The kernel the lease's end shut down: JupyterLab learns it from its session list.
    void this._sc.sessionManager.refreshRunning().catch(() => undefined);
  }

  // ---- leasing only when asked ------------------------------------------------------------
  /** The session kernel this notebook runs on or is saved with (null if none). */
  private _gpuSpec(): string | null {
    const name = this._kernel.specName() ?? this._lastSpec ?? this._context.model.defaultKernelName;
    return isSessionKernelName(name, this._ctrl.specs()) ? name : null;
  }

  /**
   * The notebook was opened: if it is saved with a session kernel nobody just chose, hold
   * JupyterLab's own start (its preference's shouldStart, read by `sessionContext.initialize`
   * and by the cell executor's `startKernel`) until the server says what its newest lease is.
   */
  private _gate(): void {
    if (this._disposed || this._chosen) {
      return;
    }
    const name = this._context.model.defaultKernelName;
    if (!isSessionKernelName(name, this._ctrl.specs())) {
      return;
    }
    this._kernel.hold();
    this._deciding = true;
    void this._decide(name);
  }

  private async _decide(name: string): Promise<void> {
    let latest: ISessionRun | null = null;
    try {
      const user = await this._ctrl.whenUser();
      latest = user ? await this._ctrl.source.latestSession(this._context.path, user) : null;
    } catch {
      latest = null; // not reachable: as before (the kernel start says what is wrong)
    }
    await this._sc.ready;
    this._deciding = false;
    if (this._disposed) {
      return;
    }
    const decision = restoreDecision(latest);
    if (latest && decision !== 'attach') {
      this._kernel.hold(); // again: a session of the ended lease that JupyterLab reconnected to is stale
      this._adopt(latest);
      this._offer = true; // `ending`: offered once its end is known (its events follow)
      this._render();
      return;
    }
    this._release();
    if (!this._sc.session?.kernel && !STARTING.has(this._sc.kernelDisplayStatus)) {
      this._kernel.start(name);
    }
  }

  /** JupyterLab may start the kernel again; the bar offers no new session. */
  private _release(): void {
    this._offer = false;
    this._kernel.release();
  }

  private _lease: SessionLease;
  private _kernel = new KernelGate(
    () => this._sc,
    () => this._ctrl.specs(),
    () => this.name
  );
  private _disposed = false;
  private _lastSpec: string | null = null;
  private _askedFor: string | null = null;
  private _triedFor: string | null = null;
  private _idleDeadline: number | null = null;
  private _idleReason: string | null = null;
  private _idleWordsDue = false;
  private _ticker = 0;
  private _admitPending = false;
  // The session's one notice.
  private _toast = new SessionToast((n, runId) => this._actions(n, runId));
  // Leasing only when asked.
  private _chosen = false;
  private _offer = false;
  private _prompting = false;
  private _pickerAllowed = false;
  private _deciding = false;
}
