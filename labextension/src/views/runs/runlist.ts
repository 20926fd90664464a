/**
 * The runs list: a virtualised listbox (fixed row height, only the rows in view are in
 * the DOM, row nodes are reused), so 10,000 runs scroll as smoothly as 10.
 *
 * A sweep is one row (its child counts and a progress bar); expanded, its children are
 * rows under it in the same virtualised list, so a sweep of 10,000 children costs what
 * 10,000 runs cost.
 */

import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { h } from '../dom';
import type { RunsModel } from '../../models/runsmodel';
import type { IRun } from '../../api/types';
import { IListRow, flattenRows, isSweep, paramsText, sweepView } from '../../models/sweepmodel';
import { isFinal, readAgo, runRowView } from '../../models/viewmodel';

export const ROW_HEIGHT = 58;
const OVERSCAN = 8;

interface IRowNodes {
  root: HTMLElement;
  name: HTMLElement;
  status: HTMLElement;
  meta: HTMLElement;
  eta: HTMLElement;
  phase: HTMLElement;
  toggle: HTMLElement;
  bar: HTMLElement;
  check: HTMLInputElement;
}

export interface IRunListOptions {
  model: RunsModel;
  /** Open a run's detail. */
  onOpen: (id: string) => void;
  /** Scrolled near the end and older runs remain (of the list, or of an expanded sweep's children). */
  onNeedMore: (sweepId?: string) => void;
  /** The children of an expanded sweep; undefined while it is collapsed. */
  children?: (sweepId: string) => RunsModel | undefined;
  /** Expand or collapse a sweep's row. */
  onToggle?: (sweepId: string) => void;
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
      if (row?.dataset.runId && ((ev.target as HTMLElement).closest('.jp-GpuPlat-runSelect') || ev.ctrlKey || ev.metaKey || ev.shiftKey)) {
        // the checkbox, ctrl/cmd-click (one more) or shift-click (a range) select runs to compare
        if (!(ev.target as HTMLElement).closest('.jp-GpuPlat-runSelect')) {
          ev.preventDefault();
        }
        const index = Number(row.dataset.index);
        if (ev.shiftKey && this._anchor >= 0) {
          this._selectRange(this._anchor, index);
        } else {
          this._toggleSelected(row.dataset.runId);
          this._anchor = index;
        }
        this._active = index;
        this.render();
        return;
      }
      if (row?.dataset.runId && (ev.target as HTMLElement).closest('.jp-GpuPlat-sweepToggle')) {
        this._active = Number(row.dataset.index);
        this._opts.onToggle?.(row.dataset.runId);
        return;
      }
      if (row?.dataset.runId) {
        this._active = Number(row.dataset.index);
        this._opts.onOpen(row.dataset.runId);
      }
    });
    _opts.model.onChange(() => this.schedule());
  }

  /** The runs selected to compare, in the order they were selected. */
  get selected(): string[] {
    return [...this._selected];
  }

  get selectionChanged(): ISignal<this, string[]> {
    return this._selectionChanged;
  }

  clearSelection(): void {
    if (this._selected.size) {
      this._selected.clear();
      this._anchor = -1;
      this._selectionChanged.emit([]);
      this.render();
    }
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

  /** The rows listed now: top-level runs, expanded sweeps' children under them. */
  get rows(): readonly IListRow[] {
    const top = this._opts.model.runs;
    const expanded = new Map<string, readonly IRun[]>();
    let key = `${this._opts.model.version}`;
    if (this._opts.children) {
      for (const run of top) {
        const m = isSweep(run) ? this._opts.children(run.id) : undefined;
        if (m) {
          expanded.set(run.id, m.runs);
          key += `|${run.id}:${m.version}`;
        }
      }
    }
    if (key !== this._rowsKey) {
      this._rowsKey = key;
      this._rowsCache = expanded.size ? flattenRows(top, expanded) : top.map(run => ({ run, depth: 0 as const }));
    }
    return this._rowsCache;
  }

  /** Render the rows in view now. */
  render(): void {
    const rows = this.rows;
    const n = rows.length;
    this._spacer.style.height = `${n * ROW_HEIGHT}px`;
    this._empty.textContent = n === 0 ? this._emptyText : '';
    this._empty.style.display = n === 0 ? '' : 'none';
    const height = this.node.clientHeight || 30 * ROW_HEIGHT;
    const top = this.node.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(n - 1, Math.ceil((top + height) / ROW_HEIGHT) + OVERSCAN);
    const now = Date.now() / 1000 - this._opts.clockOffset();
    this._first = first;
    this._last = last;

    // Recycle rows that left the window; keep the ones still in it.
    const keep = new Map<string, IRowNodes>();
    for (const [id, nodes] of this._rows) {
      const i = Number(nodes.root.dataset.index);
      if (i >= first && i <= last && rows[i]?.run.id === id) {
        keep.set(id, nodes);
      } else {
        nodes.root.style.display = 'none';
        // a pooled row names no run: a run is found in the DOM once
        delete nodes.root.dataset.runId;
        nodes.root.removeAttribute('id');
        this._pool.push(nodes);
      }
    }
    this._rows = keep;
    for (let i = first; i <= last; i++) {
      const run = rows[i].run;
      let nodes = this._rows.get(run.id);
      if (!nodes) {
        nodes = this._pool.pop() ?? this._makeRow();
        this._rows.set(run.id, nodes);
        nodes.root.style.display = '';
      }
      this._fill(nodes, rows[i], i, now);
    }
    this._orderDom(first, last);
    if (n && last >= n - 20 && this._opts.model.nextBefore !== null) {
      this._opts.onNeedMore();
    }
    // an expanded sweep whose last loaded child is in view: its next page
    for (let i = first; i <= last; i++) {
      const next = rows[i + 1];
      if (rows[i].depth === 1 && (!next || next.depth === 0)) {
        const sweepId = rows[i].run.parent;
        if (sweepId && this._opts.children?.(sweepId)?.nextBefore != null) {
          this._opts.onNeedMore(sweepId);
        }
      }
    }
  }

  /**
   * Rows in the DOM in the order they are drawn: recycled rows are placed by transform, so
   * without this, keyboard and screen-reader order (the DOM's) differs from what one sees.
   * Only rows out of place move.
   */
  private _orderDom(first: number, last: number): void {
    const rows = this.rows;
    let prev: Element = this._empty;
    for (let i = first; i <= last; i++) {
      const node = this._rows.get(rows[i].run.id)?.root;
      if (!node) {
        continue;
      }
      if (prev.nextElementSibling !== node) {
        prev.after(node);
      }
      prev = node;
    }
  }

  /** Whether a row in view shows a run whose clock still counts. */
  get live(): boolean {
    if (!this.isVisible) {
      return false;
    }
    const rows = this.rows;
    for (let i = this._first; i <= Math.min(this._last, rows.length - 1); i++) {
      if (!isFinal(rows[i].run)) {
        return true;
      }
    }
    return false;
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
    const eta = h('span', { class: 'jp-GpuPlat-runEta' });
    const phase = h('span', { class: 'jp-GpuPlat-runPhase' });
    const toggle = h('span', { class: 'jp-GpuPlat-sweepToggle', role: 'button', title: 'Show or hide its children' });
    const bar = h('div', { class: 'jp-GpuPlat-sweepBar' });
    const check = h('input', { class: 'jp-GpuPlat-runSelect', type: 'checkbox', tabindex: -1 });
    const root = h(
      'div',
      { class: 'jp-GpuPlat-runRow', role: 'option' },
      h('div', { class: 'jp-GpuPlat-runLine' }, check, toggle, name, status),
      h('div', { class: 'jp-GpuPlat-runLine jp-GpuPlat-runSub' }, meta, eta, phase),
      h('div', { class: 'jp-GpuPlat-sweepTrack' }, bar)
    );
    this.node.append(root);
    return { root, name, status, meta, eta, phase, toggle, bar, check };
  }

  private _fill(nodes: IRowNodes, row: IListRow, index: number, now: number): void {
    const run = row.run;
    const v = runRowView(run, now, readAgo(run));
    const sweep = sweepView(run);
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
    // when a waiting run is expected to start, in the service's words; what it rests on (or why unknown) on hover
    setText(nodes.eta, v.eta);
    if (nodes.eta.title !== v.etaWhy) {
      nodes.eta.title = v.etaWhy;
    }
    r.classList.toggle('jp-mod-sweep', sweep !== null);
    r.classList.toggle('jp-mod-child', row.depth === 1);
    if (sweep) {
      const open = this._opts.children?.(run.id) !== undefined;
      setText(nodes.toggle, open ? '▾' : '▸');
      nodes.toggle.setAttribute('aria-expanded', String(open));
      nodes.toggle.setAttribute('aria-label', `${open ? 'Hide' : 'Show'} the children of ${v.name}`);
      r.setAttribute('aria-expanded', String(open));
      setText(nodes.meta, sweep.countsText);
      setText(nodes.phase, sweep.progressText);
      nodes.bar.style.width = `${Math.round(sweep.fraction * 100)}%`;
      nodes.bar.parentElement!.setAttribute('aria-label', `${sweep.progressText} of ${v.name}`);
    } else {
      setText(nodes.toggle, '');
      nodes.toggle.removeAttribute('aria-expanded');
      r.removeAttribute('aria-expanded');
      const params = row.depth === 1 ? paramsText(run.params) : '';
      // a waiting run says why it waits (reason and numbers) where the others say where they run
      // (a sweep's child keeps its params first: they are what tells it from its siblings)
      const where = `${v.queue} · ${v.presets} · ${v.gpus}`;
      setText(nodes.meta, params ? (v.why ? `${params} · ${v.why}` : params) : v.why || where);
      nodes.meta.classList.toggle('jp-mod-why', v.why !== '');
      setText(nodes.phase, v.phaseText);
    }
    const picked = this._selected.has(run.id);
    nodes.check.checked = picked;
    nodes.check.setAttribute('aria-label', `Select ${v.name} to compare`);
    r.classList.toggle('jp-mod-selected', picked);
    r.title = v.title;
    const active = index === this._active;
    r.classList.toggle('jp-mod-active', active);
    r.setAttribute('aria-selected', String(active));
    if (active) {
      this.node.setAttribute('aria-activedescendant', r.id);
    }
  }

  private _toggleSelected(id: string): void {
    if (!this._selected.delete(id)) {
      this._selected.add(id);
    }
    this._selectionChanged.emit(this.selected);
  }

  private _selectRange(from: number, to: number): void {
    const rows = this.rows;
    for (let i = Math.min(from, to); i <= Math.max(from, to); i++) {
      const run = rows[i]?.run;
      if (run && !isSweep(run)) {
        this._selected.add(run.id);
      }
    }
    this._selectionChanged.emit(this.selected);
  }

  private _onKey(ev: KeyboardEvent): void {
    const rows = this.rows;
    const n = rows.length;
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
      case 'ArrowRight':
      case 'ArrowLeft': {
        // a sweep's row: expand (right) or collapse (left) its children
        const run = rows[Math.max(0, this._active)]?.run;
        const open = run ? this._opts.children?.(run.id) !== undefined : false;
        if (run && isSweep(run) && open === (ev.key === 'ArrowLeft')) {
          ev.preventDefault();
          this._opts.onToggle?.(run.id);
        }
        return;
      }
      case 'Enter':
      case ' ': {
        const run = rows[Math.max(0, this._active)]?.run;
        if (run && ev.key === ' ' && (ev.ctrlKey || ev.metaKey)) {
          // Ctrl+Space: select the active run to compare (the keyboard's ctrl-click)
          ev.preventDefault();
          this._toggleSelected(run.id);
          this._anchor = this._active;
          this.render();
          return;
        }
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
  private _rowsKey = '';
  private _rowsCache: readonly IListRow[] = [];
  private _selected = new Set<string>();
  private _anchor = -1;
  private _first = 0;
  private _last = -1;
  private _selectionChanged = new Signal<this, string[]>(this);
}

function setText(el: HTMLElement, text: string): void {
  if (el.textContent !== text) {
    el.textContent = text;
  }
}
