/**
 * Live logs of one run: follow (auto-scroll), pause (freeze the view while lines keep
 * arriving), search (show matching lines) and download (the whole log file).
 */

import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { h, saveBlob } from '../dom';
import type { IStreamHandle, StreamState } from '../../api/types';
import type { RunDetailSource } from '../../models/rundetailsource';

/** Lines kept in memory and shown; the download has the whole log. */
export const MAX_LINES = 5000;

export class LogView extends Widget {
  constructor(private _source: RunDetailSource) {
    super();
    this.addClass('jp-GpuPlat-logs');
    this._follow = h('button', {
      class: 'jp-GpuPlat-button jp-GpuPlat-logFollow',
      'aria-pressed': 'true',
      title: 'Scroll to each new line as it arrives',
      onclick: () => this.setFollow(!this._following)
    }, 'Follow');
    this._pause = h('button', {
      class: 'jp-GpuPlat-button jp-GpuPlat-logPause',
      'aria-pressed': 'false',
      title: 'Freeze the view; new lines are kept and shown on resume',
      onclick: () => this.setPaused(!this._paused)
    }, 'Pause');
    this._search = h('input', {
      class: 'jp-GpuPlat-input jp-GpuPlat-logSearch',
      type: 'search',
      placeholder: 'Search the log',
      'aria-label': 'Search the log'
    });
    this._search.addEventListener('input', () => this._renderAll());
    const download = h('button', {
      class: 'jp-GpuPlat-button jp-GpuPlat-logDownload',
      title: 'Download the whole log as a text file',
      onclick: () => void this._download()
    }, 'Download');
    this._state = h('span', { class: 'jp-GpuPlat-logState', 'aria-live': 'polite' });
    this._body = h('div', {
      class: 'jp-GpuPlat-logBody',
      role: 'log',
      'aria-label': 'Run log',
      tabindex: 0
    });
    this.node.append(
      h('div', { class: 'jp-GpuPlat-toolbar' }, this._follow, this._pause, this._search, download, this._state),
      this._body
    );
  }

  /** Start streaming (idempotent). */
  start(): void {
    if (this._stream) {
      return;
    }
    this._stream = this._source.logs({
      onLines: lines => this._add(lines),
      onEnd: status => {
        this._ended = status;
        this._showState('closed');
      },
      onState: s => this._showState(s)
    });
  }

  /** Lines arrived (how many): the run wrote more, so its output sizes changed too. */
  get linesAdded(): ISignal<this, number> {
    return this._linesAdded;
  }

  get lineCount(): number {
    return this._lines.length + this._dropped;
  }

  setFollow(on: boolean): void {
    this._following = on;
    this._follow.setAttribute('aria-pressed', String(on));
    if (on) {
      this._scrollEnd();
    }
  }

  setPaused(on: boolean): void {
    this._paused = on;
    this._pause.setAttribute('aria-pressed', String(on));
    if (!on) {
      this._pause.textContent = 'Pause';
      this._flushPending();
    } else {
      this._pause.textContent = 'Resume';
    }
  }

  dispose(): void {
    this._stream?.close();
    this._stream = null;
    super.dispose();
  }

  private _add(lines: string[]): void {
    this._lines.push(...lines);
    if (this._lines.length > MAX_LINES) {
      const cut = this._lines.length - MAX_LINES;
      this._lines.splice(0, cut);
      this._dropped += cut;
    }
    this._pending += lines.length;
    this._linesAdded.emit(lines.length);
    if (this._paused) {
      this._pause.textContent = `Resume (${this._pending} new)`;
      return;
    }
    this._flushPending();
  }

  private _flushPending(): void {
    const n = Math.min(this._pending, this._lines.length);
    this._pending = 0;
    if (this._search.value) {
      this._renderAll();
      return;
    }
    const frag = document.createDocumentFragment();
    for (const line of this._lines.slice(this._lines.length - n)) {
      frag.append(this._lineNode(line, ''));
    }
    this._body.append(frag);
    const extra = this._body.childElementCount - MAX_LINES;
    for (let i = 0; i < extra; i++) {
      this._body.firstElementChild?.remove();
    }
    this._showState(this._lastState);
    if (this._following) {
      this._scrollEnd();
    }
  }

  private _renderAll(): void {
    const term = this._search.value;
    const needle = term.toLowerCase();
    const frag = document.createDocumentFragment();
    let shown = 0;
    for (const line of this._lines) {
      if (!needle || line.toLowerCase().includes(needle)) {
        frag.append(this._lineNode(line, needle));
        shown += 1;
      }
    }
    this._body.replaceChildren(frag);
    this._matches = needle ? shown : null;
    this._pending = 0;
    this._showState(this._lastState);
    if (this._following) {
      this._scrollEnd();
    }
  }

  private _lineNode(line: string, needle: string): HTMLElement {
    const div = document.createElement('div');
    div.className = 'jp-GpuPlat-logLine';
    if (!needle) {
      div.textContent = line;
      return div;
    }
    const lower = line.toLowerCase();
    let at = 0;
    for (;;) {
      const i = lower.indexOf(needle, at);
      if (i < 0) {
        break;
      }
      div.append(line.slice(at, i), h('mark', null, line.slice(i, i + needle.length)));
      at = i + needle.length;
    }
    div.append(line.slice(at));
    return div;
  }

  private _scrollEnd(): void {
    this._body.scrollTop = this._body.scrollHeight;
  }

  private _showState(s: StreamState): void {
    this._lastState = s;
    const parts: string[] = [];
    if (this._matches !== null) {
      parts.push(`${this._matches} matching`);
    }
    parts.push(`${this.lineCount} lines`);
    if (this._dropped) {
      parts.push(`first ${this._dropped} only in the download`);
    }
    if (this._ended) {
      parts.push(`run ${this._ended}`);
    } else if (s === 'live') {
      parts.push('live');
    } else if (s === 'reconnecting') {
      parts.push('reconnecting…');
    } else if (s === 'connecting') {
      parts.push('connecting…');
    }
    this._state.textContent = parts.join(' · ');
    this.node.dataset.state = this._ended ? 'ended' : s;
  }

  private async _download(): Promise<void> {
    try {
      saveBlob(await this._source.logBlob(), `${this._source.runId}.log`);
    } catch (error) {
      this._state.textContent = `download failed: ${(error as Error).message}`;
    }
  }

  private _follow: HTMLButtonElement;
  private _pause: HTMLButtonElement;
  private _search: HTMLInputElement;
  private _state: HTMLElement;
  private _body: HTMLElement;
  private _stream: IStreamHandle | null = null;
  private _lines: string[] = [];
  private _dropped = 0;
  private _pending = 0;
  private _following = true;
  private _paused = false;
  private _matches: number | null = null;
  private _ended: string | null = null;
  private _lastState: StreamState = 'connecting';
  private _linesAdded = new Signal<this, number>(this);
}
