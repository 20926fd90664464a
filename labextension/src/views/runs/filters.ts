/**
 * The runs page's filter bar: search, project/status/queue selects, the counts line and
 * "Compare (n)" for the runs selected in the list.
 */

import { Widget } from '@lumino/widgets';

import { h } from '../dom';
import type { RunsModel } from '../../models/runsmodel';
import type { IProject } from '../../api/types';
import { IRunFilter, STATUS_GROUPS, StatusGroup, groupCounts } from '../../models/viewmodel';

const SEARCH_DELAY_MS = 250;

export interface IRunFiltersOptions {
  onChange: (change: Partial<IRunFilter>) => void;
  /** Compare the selected runs; absent: no Compare button. */
  onCompare?: () => void;
  onClearSelection?: () => void;
}

export class RunFilters extends Widget {
  constructor(_opts: IRunFiltersOptions) {
    super({ node: h('div', { class: 'jp-GpuPlat-filters' }) });
    this._search = h('input', {
      class: 'jp-GpuPlat-input jp-GpuPlat-search',
      type: 'search',
      placeholder: 'Search runs by name',
      'aria-label': 'Search runs by name'
    });
    this._search.addEventListener('input', () => {
      window.clearTimeout(this._searchTimer);
      this._searchTimer = window.setTimeout(() => _opts.onChange({ search: this._search.value.trim() }), SEARCH_DELAY_MS);
    });
    this._project = this._select('Filter by project', v => _opts.onChange({ project: v }));
    this._status = this._select('Filter by status', v => _opts.onChange({ group: v as StatusGroup | '' }));
    this._status.append(h('option', { value: '' }, 'All statuses'), ...STATUS_GROUPS.map(g => h('option', { value: g.group }, g.label)));
    this._queue = this._select('Filter by queue', v => _opts.onChange({ queue: v }));
    this.counts = h('div', { class: 'jp-GpuPlat-counts', 'aria-live': 'polite' });
    this.error = h('div');
    this._compare = h(
      'button',
      {
        class: 'jp-GpuPlat-button jp-GpuPlat-compare',
        title: 'Compare the selected runs in a main-area tab (select with the checkboxes, Ctrl-click or Shift-click)',
        onclick: () => _opts.onCompare?.()
      },
      'Compare (0)'
    );
    this._clear = h('button', { class: 'jp-GpuPlat-button jp-GpuPlat-clearSelection', title: 'Clear the selection', onclick: () => _opts.onClearSelection?.() }, 'Clear');
    this._selection = h('div', { class: 'jp-GpuPlat-selection' }, this._compare, this._clear);
    this.setSelected(0);
    this.node.append(
      this._search,
      h('div', { class: 'jp-GpuPlat-filterRow' }, this._project, this._status, this._queue),
      h('div', { class: 'jp-GpuPlat-countsRow' }, this.counts, _opts.onCompare ? this._selection : null),
      this.error
    );
    this.fill([], []);
  }

  readonly counts: HTMLElement;
  readonly error: HTMLElement;

  /** The project and queue options (the chosen ones stay when still offered). */
  fill(projects: IProject[], queues: string[]): void {
    const keep = (sel: HTMLSelectElement, all: string, names: string[]) => {
      const v = sel.value;
      const options = [h('option', { value: '' }, all), ...names.map(n => h('option', { value: n }, n))];
      sel.replaceChildren(...options);
      sel.value = names.includes(v) ? v : '';
      sel.title = sel.selectedOptions[0]?.textContent ?? '';
    };
    keep(this._project, 'All projects', projects.map(p => p.name));
    keep(this._queue, 'All queues', [...queues].sort());
  }

  /** The counts line (`12 runs: 2 waiting · 10 succeeded`), at most once per frame. */
  showCounts(model: RunsModel): void {
    if (this._countsFrame !== null) {
      return;
    }
    this._countsFrame = requestAnimationFrame(() => {
      this._countsFrame = null;
      const runs = model.runs;
      const c = groupCounts(runs);
      const parts = STATUS_GROUPS.filter(g => c[g.group]).map(g => `${c[g.group]} ${g.label.toLowerCase()}`);
      const more = model.nextBefore !== null ? '+' : '';
      const noun = runs.length === 1 && !more ? 'run' : 'runs';
      this.counts.textContent = `${runs.length.toLocaleString()}${more} ${noun}${parts.length ? ': ' + parts.join(' · ') : ''}`;
    });
  }

  /** How many runs are selected: Compare needs two. */
  setSelected(n: number): void {
    this._compare.textContent = `Compare (${n})`;
    this._compare.disabled = n < 2;
    this._selection.hidden = n === 0;
  }

  private _select(label: string, onChange: (value: string) => void): HTMLSelectElement {
    const sel = h('select', { class: 'jp-GpuPlat-select', 'aria-label': label });
    sel.addEventListener('change', () => {
      sel.title = sel.selectedOptions[0]?.textContent ?? '';
      onChange(sel.value);
    });
    return sel;
  }

  private _search: HTMLInputElement;
  private _project: HTMLSelectElement;
  private _status: HTMLSelectElement;
  private _queue: HTMLSelectElement;
  private _compare: HTMLButtonElement;
  private _clear: HTMLButtonElement;
  private _selection: HTMLElement;
  private _searchTimer = 0;
  private _countsFrame: number | null = null;
}
