/**
 * Notifications (JupyterLab's notification API) when the user's runs start, finish,
 * fail, or have waited unusually long; each links to the run in the sidebar.
 *
 * Every toast closes by itself (the notification centre keeps it); failures share ONE
 * notice, updated in place ("3 runs failed" with a link per run) until it is dismissed.
 */

import { Notification } from '@jupyterlab/apputils';

import type { AccountSource } from '../../models/accountsource';
import type { IEtaEvent, IStatusEvent } from '../../api/types';
import {
  DEFAULT_NOTIFY,
  FAILED_NAMED,
  IFailedRun,
  INotifySettings,
  IWaitingRun,
  TOAST_MS,
  estimateNotice,
  failureSummary,
  formatDuration,
  longWaiters,
  waitedBy,
  waitingFromEvent,
  waitingRun,
  noticeFor,
  tellsMe,
  statusGroup
} from '../../models/viewmodel';

const LONG_WAIT_CHECK_MS = 30_000;
// A "started" toast waits this long: a run that ended meanwhile is announced by its end only.
const STARTED_GRACE_MS = 1000;

export class Notifier {
  constructor(
    private _account: AccountSource,
    private _openRun: (id: string) => void,
    private _clockOffset: () => number
  ) {
    this._timer = window.setInterval(() => this.checkLongWaits(), LONG_WAIT_CHECK_MS);
  }

  settings: INotifySettings = { ...DEFAULT_NOTIFY };

  /** Runs announced elsewhere (a notebook follows its GPU session and says how it ends). */
  ignore: (runId: string) => boolean = () => false;

  /** Whose runs to announce; empty until `whoami` answered. */
  set user(name: string) {
    this._user = name;
    void this._loadWaiting();
  }

  onEvent(ev: IStatusEvent): void {
    if (!tellsMe(ev, this._user)) {
      return;
    }
    this._trackWaiting(ev);
    const n = noticeFor(ev, this._user, this.settings);
    if (!n || this.ignore(ev.run_id)) {
      return;
    }
    const key = `${ev.run_id}:${n.kind}`;
    if (this._shown.has(key)) {
      return;
    }
    this._shown.add(key);
    if (n.kind !== 'started') {
      // the run ended: its "started" notice is old news (or never shown, for a quick end)
      this._ended.add(ev.run_id);
      this._dismissStarted(ev.run_id);
    }
    if (n.kind === 'failed') {
      this._failed({ id: ev.run_id, name: ev.name || ev.run_id, message: ev.message });
    } else {
      if (n.kind !== 'started') {
        this._emit(n.message, n.type, ev.run_id);
      } else {
        // A run that ends at once is announced by its end alone: no toast per start of a burst.
        const runId = ev.run_id;
        window.setTimeout(() => {
          if (!this._ended.has(runId)) {
            this._started.set(runId, this._emit(n.message, n.type, runId));
          }
        }, STARTED_GRACE_MS);
      }
    }
  }

  /**
   * Start estimates moved: a run of mine submitted while the sidebar is open that still waits says,
   * once, when it is expected to start (its first estimate with a number). A run that starts at once
   * ("starts now") is announced by its start alone.
   */
  onEta(ev: IEtaEvent): void {
    for (const change of ev.runs) {
      const id = change.run_id;
      const run = this._waiting.get(id);
      const n = run && this._fresh.has(id) && !this.ignore(id) ? estimateNotice(run, change, this.settings) : null;
      if (!run || !n) {
        continue;
      }
      this._fresh.delete(id);
      window.setTimeout(() => {
        // (a notebook may have taken its GPU session's lease meanwhile: its own notice says the estimate)
        if (this._waiting.has(id) && !this.ignore(id)) {
          this._emit(n.message, n.type, id);
        }
      }, STARTED_GRACE_MS);
    }
  }

  /** The id of the one failure notice while it is shown or in the centre; null otherwise. */
  get failureNoticeId(): string | null {
    return this._failureId !== null && Notification.manager.has(this._failureId) ? this._failureId : null;
  }

  /** Announce my runs that have waited longer than the setting (once per run). */
  checkLongWaits(): void {
    const now = Date.now() / 1000 - this._clockOffset();
    for (const r of longWaiters(this._waiting.values(), this._user, now, this.settings, this._announced)) {
      this._announced.add(r.id);
      this._emit(
        `Run ${r.name || r.id} has waited ${formatDuration(waitedBy(r, now))} in queue ${r.queue}`,
        'warning',
        r.id
      );
    }
  }

  dispose(): void {
    window.clearInterval(this._timer);
  }

  /**
   * Add a failure to the one failure notice; a new notice once the last was dismissed or
   * its toast has closed (a failure an hour later is news, not "4 runs failed").
   */
  private _failed(run: IFailedRun): void {
    const now = Date.now();
    let id = this.failureNoticeId;
    if (id !== null && now - this._failureAt > TOAST_MS.error) {
      id = null;
    }
    this._failureAt = now;
    if (id === null) {
      this._failures = [];
    }
    this._failures.push(run);
    const message = failureSummary(this._failures);
    const actions = this._failures
      .slice(-FAILED_NAMED)
      .reverse()
      .map(f => ({
        label: this._failures.length === 1 ? 'Open run' : `Open ${f.name || f.id}`,
        caption: `Show ${f.id} in the GPU platform sidebar`,
        displayType: 'link' as const,
        callback: (ev: MouseEvent) => {
          if (this._failures.length > 1) {
            ev.preventDefault(); // keep the notice: its other runs are still to see
          }
          this._openRun(f.id);
        }
      }));
    if (id !== null && Notification.update({ id, message, type: 'error', autoClose: TOAST_MS.error, actions })) {
      return;
    }
    this._failureId = Notification.emit(message, 'error', { autoClose: TOAST_MS.error, actions });
  }

  private _dismissStarted(runId: string): void {
    const id = this._started.get(runId);
    if (id !== undefined) {
      this._started.delete(runId);
      Notification.dismiss(id);
    }
  }

  private _emit(message: string, type: 'info' | 'success' | 'error' | 'warning', runId: string): string {
    return Notification.emit(message, type, {
      autoClose: TOAST_MS[type],
      actions: [
        {
          label: 'Open run',
          caption: `Show ${runId} in the GPU platform sidebar`,
          callback: () => this._openRun(runId)
        }
      ]
    });
  }

  private _trackWaiting(ev: IStatusEvent): void {
    if (statusGroup(ev) !== 'waiting') {
      this._waiting.delete(ev.run_id);
      this._fresh.delete(ev.run_id);
      return;
    }
    if (ev.status === 'created' && !ev.parent) {
      this._fresh.add(ev.run_id); // submitted just now (a sweep's children are announced by their sweep)
    }
    if (!this._waiting.has(ev.run_id)) {
      this._waiting.set(ev.run_id, waitingFromEvent(ev));
    }
  }

  private async _loadWaiting(): Promise<void> {
    try {
      const page = await this._account.waitingRuns(this._user);
      const serverNow = Date.now() / 1000 - this._clockOffset();
      for (const r of page.runs) {
        this._waiting.set(r.id, waitingRun(r, serverNow));
      }
      this.checkLongWaits();
    } catch {
      // the sidebar shows connection problems; notifications just stay quiet
    }
  }

  private _user = '';
  private _timer: number;
  private _waiting = new Map<string, IWaitingRun>();
  // My runs submitted while the sidebar is open, not yet announced with their first estimate.
  private _fresh = new Set<string>();
  private _shown = new Set<string>();
  private _announced = new Set<string>();
  private _failures: IFailedRun[] = [];
  private _started = new Map<string, string>();
  private _ended = new Set<string>();
  private _failureId: string | null = null;
  private _failureAt = 0;
}
