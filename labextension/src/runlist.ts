/**
 * The runs list: a virtualised listbox (fixed row height, only the rows in view are in
 * the DOM, row nodes are reused), so 10,000 runs scroll as smoothly as 10.
 */

import { Widget } from '@lumino/widgets';

import { h } from './dom';
import type { RunsModel } from './runsmodel';
import type { IRun } from './types';
import { runRowView } from './viewmodel';

export const ROW_HEIGHT = 46;
const OVERSCAN = 8;

interface IRowNodes {
  root: HTMLElement;
  name: HTMLElement;
  status: HTMLElement;
  meta: HTMLElement;
  phase: HTMLElement;
}

export interface IRunListOptions {
  model: RunsModel;
  /** Open a run's detail. */
  onOpen: (id: string) => void;
  /** Scrolled near the end and older runs remain. */
  onNeedMore: () => void;
  /** The server clock's offset (client - server seconds). */
  clockOffset: () => number;
}

export class RunList extends Widget {
  constructor(private _opts: IRunListOptions) {
    super();
    this.addClass('jp-GpuPlat-runList');
    this.node.tabIndex = 0;
    this.node.setAttribute('role', 'listbox');
    this.node.setAttribute('aria-label', 'Runs');
    this._spacer = h('div', { class: 'jp-GpuPlat-runSpacer' });
    this._empty = h('div', { class: 'jp-GpuPlat-empty' });
    this.node.append(this._spacer, this._empty);
    this.node.addEventListener('scroll', () => this.schedule(), { passive: true });
    this.node.addEventListener('keydown', ev => this._onKey(ev));
    this.node.addEventListener('click', ev => {
      const row = (ev.target as HTMLElement).closest<HTMLElement>('.jp-GpuPlat-runRow');
      if (row?.dataset.runId) {
        this._active = Number(row.dataset.index);
        this._opts.onOpen(row.dataset.runId);
      }
    });
    _opts.model.onChange(() => this.schedule());
  }

  /** Text shown when nothing is listed (loading, no match, error). */
  set emptyText(text: string) {
    this._emptyText = text;
    this.schedule();
  }

  /** Render on the next frame; many changes in one frame cost one render. */
  schedule(): void {
    if (this._frame === null) {
      this._frame = requestAnimationFrame(() => {
        this._frame = null;
        this.render();
      });
    }
  }

  /** Render the rows in view now. */
  render(): void {
    const runs = this._opts.model.runs;
    const n = runs.length;
    this._spacer.style.height = `${n * ROW_HEIGHT}px`;
    this._empty.textContent = n === 0 ? this._emptyText : '';
    this._empty.style.display = n === 0 ? '' : 'none';
    const height = this.node.clientHeight || 30 * ROW_HEIGHT;
    const top = this.node.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(n - 1, Math.ceil((top + height) / ROW_HEIGHT) + OVERSCAN);
    const now = Date.now() / 1000 - this._opts.clockOffset();

    // Recycle rows that left the window; keep the ones still in it.
    const keep = new Map<string, IRowNodes>();
    for (const [id, nodes] of this._rows) {
      const i = Number(nodes.root.dataset.index);
      if (i >= first && i <= last && runs[i]?.id === id) {
        keep.set(id, nodes);
      } else {
        nodes.root.style.display = 'none';
        this._pool.push(nodes);
      }
    }
    this._rows = keep;
    for (let i = first; i <= last; i++) {
      const run = runs[i];
      let nodes = this._rows.get(run.id);
      if (!nodes) {
        nodes = this._pool.pop() ?? this._makeRow();
        this._rows.set(run.id, nodes);
        nodes.root.style.display = '';
      }
      this._fill(nodes, run, i, now);
    }
    if (n && last >= n - 20 && this._opts.model.nextBefore !== null) {
      this._opts.onNeedMore();
    }
  }

  /** Refresh the ticking "time in phase" of the rows in view. */
  tick(): void {
    if (this.isVisible) {
      this.render();
    }
  }

  protected onAfterShow(): void {
    this.render();
  }

  protected onResize(): void {
    this.schedule();
  }

  private _makeRow(): IRowNodes {
    const name = h('span', { class: 'jp-GpuPlat-runName' });
    const status = h('span', { class: 'jp-GpuPlat-status' });
    const meta = h('span', { class: 'jp-GpuPlat-runMeta' });
    const phase = h('span', { class: 'jp-GpuPlat-runPhase' });
    const root = h(
      'div',
      { class: 'jp-GpuPlat-runRow', role: 'option' },
      h('div', { class: 'jp-GpuPlat-runLine' }, name, status),
      h('div', { class: 'jp-GpuPlat-runLine jp-GpuPlat-runSub' }, meta, phase)
    );
    this.node.append(root);
    return { root, name, status, meta, phase };
  }

  private _fill(nodes: IRowNodes, run: IRun, index: number, now: number): void {
    const v = runRowView(run, now);
    const r = nodes.root;
    if (r.dataset.runId !== run.id) {
      r.dataset.runId = run.id;
      r.id = `jp-GpuPlat-row-${run.id}`;
    }
    r.dataset.index = String(index);
    r.style.transform = `translateY(${index * ROW_HEIGHT}px)`;
    setText(nodes.name, v.name);
    setText(nodes.status, v.status);
    if (nodes.status.dataset.group !== v.group) {
      nodes.status.dataset.group = v.group;
    }
    r.dataset.status = v.status;
    setText(nodes.meta, `${v.queue} · ${v.presets} · ${v.gpus}`);
    setText(nodes.phase, v.phaseText);
    r.title = v.title;
    const active = index === this._active;
    r.classList.toggle('jp-mod-active', active);
    r.setAttribute('aria-selected', String(active));
    if (active) {
      this.node.setAttribute('aria-activedescendant', r.id);
    }
  }

  private _onKey(ev: KeyboardEvent): void {
    const n = this._opts.model.runs.length;
    if (!n) {
      return;
    }
    let next = this._active;
    switch (ev.key) {
      case 'ArrowDown':
        next = Math.min(n - 1, this._active + 1);
        break;
      case 'ArrowUp':
        next = Math.max(0, this._active - 1);
        break;
      case 'Home':
        next = 0;
        break;
      case 'End':
        next = n - 1;
        break;
      case 'PageDown':
        next = Math.min(n - 1, this._active + Math.floor(this.node.clientHeight / ROW_HEIGHT));
        break;
      case 'PageUp':
        next = Math.max(0, this._active - Math.floor(this.node.clientHeight / ROW_HEIGHT));
        break;
      case 'Enter':
      case ' ': {
        const run = this._opts.model.runs[Math.max(0, this._active)];
        if (run) {
          ev.preventDefault();
          this._opts.onOpen(run.id);
        }
        return;
      }
      default:
        return;
    }
    ev.preventDefault();
    this._active = Math.max(0, next);
    const top = this._active * ROW_HEIGHT;
    if (top < this.node.scrollTop) {
      this.node.scrollTop = top;
    } else if (top + ROW_HEIGHT > this.node.scrollTop + this.node.clientHeight) {
      this.node.scrollTop = top + ROW_HEIGHT - this.node.clientHeight;
    }
    this.render();
  }

  private _spacer: HTMLElement;
  private _empty: HTMLElement;
  private _emptyText = 'Loading runs…';
  private _rows = new Map<string, IRowNodes>();
  private _pool: IRowNodes[] = [];
  private _frame: number | null = null;
  private _active = -1;
}

function setText(el: HTMLElement, text: string): void {
  if (el.textContent !== text) {
    el.textContent = text;
  }
}
