/** The one notice of a GPU session: emitted once per lease, then updated in place. */

import { Notification } from '@jupyterlab/apputils';

import { ISessionNotice, NoticeStage, noticeDelayMs } from '../../models/sessionmodel';

/**
 * An update soon after the toast was shown waits (NOTICE_SETTLE_MS: the toast library drops an
 * update of a toast it is still creating); a toast closed meanwhile comes back with the news.
 */
export class SessionToast {
  constructor(private _actions: (n: ISessionNotice, runId: string) => Notification.IAction[]) {}

  /** The stage the notice of `runId` says (or is about to); null when that lease has none. */
  stageOf(runId: string | undefined): NoticeStage | null {
    return this._id !== null && runId !== undefined && this._runId === runId ? this._stage : null;
  }

  show(n: ISessionNotice, runId: string): void {
    if (this._id === null || this._runId !== runId) {
      window.clearTimeout(this._timer);
      this._timer = 0;
      this._pending = null;
      this._id = Notification.emit(n.message, n.type, { autoClose: n.autoClose, actions: this._actions(n, runId) });
      this._runId = runId;
      this._stage = n.stage;
      this._text = n.message;
      this._shownAt = Date.now();
      return;
    }
    if (n.message === this._text && n.stage === this._stage && this._pending === null) {
      return;
    }
    this._pending = n;
    this._stage = n.stage;
    const wait = noticeDelayMs(this._shownAt, Date.now());
    if (wait > 0) {
      if (!this._timer) {
        this._timer = window.setTimeout(() => {
          this._timer = 0;
          this._flush();
        }, wait);
      }
      return;
    }
    this._flush();
  }

  dispose(): void {
    this._disposed = true;
    window.clearTimeout(this._timer);
  }

  private _flush(): void {
    const n = this._pending;
    const id = this._id;
    const runId = this._runId;
    if (!n || id === null || runId === null || this._disposed) {
      return;
    }
    this._pending = null;
    const actions = this._actions(n, runId);
    if (!Notification.update({ id, message: n.message, type: n.type, autoClose: n.autoClose, actions })) {
      this._id = Notification.emit(n.message, n.type, { autoClose: n.autoClose, actions }); // dismissed from the list
    }
    this._text = n.message;
    this._shownAt = Date.now();
  }

  private _disposed = false;
  private _id: string | null = null;
  private _runId: string | null = null;
  private _stage: NoticeStage | null = null;
  private _text = '';
  private _shownAt = 0;
  private _timer = 0;
  private _pending: ISessionNotice | null = null;
}
