/**
 * Insights tab: observed waits, waits by reason, GPU-hours against quota and against busy,
 * goodput, refusals, failures, top users and idle GPU holders from `GET insights`, for one
 * queue, one project or all the caller may see (the service filters: members get their
 * projects only), and the what-if form below it.
 */

import { Widget } from '@lumino/widgets';

import { errorBox, h } from '../dom';
import { GpuPlatAPIError } from '../../api/errors';
import type { InsightsSource } from '../../models/insightssource';
import {
  BUSY_HEAD,
  IBusy,
  IIdleHolder,
  busyCell,
  busyText,
  busyThreshold,
  idleHolderText,
  idleRunText,
  idleTitle
} from '../../models/insightsgpu';
import {
  IBar,
  ICount,
  IFlavorInsight,
  IInsightsView,
  IQueueInsight,
  IScopeOption,
  IUsage,
  SINCE_CHOICES,
  SinceChoice,
  flavorTable,
  formatHours,
  formatPercent,
  goodputBars,
  insightsQuery,
  normalizeInsights,
  reasonBars,
  scopeOptions,
  usagePaths,
  waitBars
} from '../../models/insightsmodel';
import { WhatIfForm } from './whatif';

const SVG = 'http://www.w3.org/2000/svg';
const W = 240;
const H = 60;

export interface IInsightsOptions {
  source: InsightsSource;
  clockOffset: () => number;
  /** Show a run (an idle holder's worst runs link to it); absent: ids are plain text. */
  onOpen?: (id: string) => void;
}

export class InsightsView extends Widget {
  constructor(private _opts: IInsightsOptions) {
    super();
    this.addClass('jp-GpuPlat-insights');
    this._scope = h('select', { class: 'jp-GpuPlat-select jp-GpuPlat-insightsScope', 'aria-label': 'Insights for' });
    this._since = h(
      'select',
      { class: 'jp-GpuPlat-select jp-GpuPlat-insightsSince', 'aria-label': 'Time range' },
      ...SINCE_CHOICES.map(c => h('option', { value: c.value }, c.label))
    );
    this._since.value = '7d';
    this._scope.addEventListener('change', () => void this.load());
    this._since.addEventListener('change', () => void this.load());
    this._error = h('div');
    this._body = h('div', { class: 'jp-GpuPlat-insightsBody', 'aria-live': 'polite' });
    this.whatif = new WhatIfForm({ source: _opts.source, clockOffset: _opts.clockOffset });
    this.node.append(
      h('div', { class: 'jp-GpuPlat-filterRow' }, this._scope, this._since),
      this._error,
      this._body,
      this.whatif.node
    );
  }

  readonly whatif: WhatIfForm;

  get data(): IInsightsView | null {
    return this._data;
  }

  /** Fill the selector from the queues and projects this caller may see, then load. */
  async refresh(): Promise<void> {
    try {
      const [queues, projects] = await this._opts.source.scopes();
      const names = queues.map(q => q.name);
      this._options = scopeOptions(
        names,
        projects.map(p => p.name)
      );
      const keep = this._scope.value;
      this._scope.replaceChildren(...this._options.map(o => h('option', { value: o.value }, o.label)));
      if (this._options.some(o => o.value === keep)) {
        this._scope.value = keep;
      }
      this.whatif.setQueues(names);
    } catch (error) {
      this._error.replaceChildren(errorBox(error));
      return;
    }
    await this.load();
  }

  async load(): Promise<void> {
    const opt = this._options.find(o => o.value === this._scope.value) ?? this._options[0];
    if (!opt) {
      return;
    }
    const since = this._since.value as SinceChoice;
    this.whatif.since = since;
    try {
      // null: a later load started meanwhile and its answer wins
      const raw = await this._opts.source.insights(insightsQuery(opt.scope, since));
      if (raw === null) {
        return;
      }
      this._data = normalizeInsights(raw);
      this._error.replaceChildren();
      this._render(this._data);
    } catch (error) {
      const missing = error instanceof GpuPlatAPIError && error.status === 404 && !error.code;
      this._body.replaceChildren();
      this._error.replaceChildren(
        missing
          ? h('div', { class: 'jp-GpuPlat-muted' }, 'Insights need the insights API (GET insights), which this server does not have.')
          : errorBox(error)
      );
    }
  }

  private _render(d: IInsightsView): void {
    if (!d.queues.length) {
      this._body.replaceChildren(h('div', { class: 'jp-GpuPlat-empty' }, 'No runs in this range for queues you may see.'));
      return;
    }
    this._body.replaceChildren(
      h(
        'div',
        { class: 'jp-GpuPlat-insightsSummary' },
        `Quota utilisation ${formatPercent(d.utilisation)}`,
        d.machineUtilisation !== null ? ` · machine ${formatPercent(d.machineUtilisation)}` : ''
      ),
      ...present(busyLine('total', d.gpuHours, d.busy, busyThreshold(d.busyPercent))),
      figure('GPU-hours used vs quota', 'usage', usageChart(d.usage)),
      ...(d.flavors.length ? [flavorFigure('Per flavor', 'flavors', d.flavors)] : []),
      ...d.queues.map(q => this._queue(q)),
      figure('Goodput per queue (running time / lifetime)', 'goodput', barChart(goodputBars(d.queues))),
      countTable('Refusals by rule', 'refusals', 'Rule', d.refusals),
      countTable('Failures by reason', 'failures', 'Reason', d.failures),
      table(
        'Top users',
        'users',
        ['User', 'Project', 'Runs', 'GPU-hours', BUSY_HEAD],
        d.topUsers.map(u => [u.user, u.project, String(u.runs), formatHours(u.gpuHours), busyCell(u.busy)])
      ),
      ...(d.projects.length
        ? [
            table(
              'Per project',
              'projects',
              ['Project', 'Runs', 'GPU-hours', BUSY_HEAD],
              d.projects.map(p => [p.project, String(p.runs), formatHours(p.gpuHours), busyCell(p.busy)])
            )
          ]
        : []),
      ...(d.busyPercent !== null ? [this._idle(d.idleHolders, d.busyPercent)] : [])
    );
  }

  /** Who held the most idle GPU time, each with its worst runs as links to them. */
  private _idle(holders: IIdleHolder[], busyPercent: number): HTMLElement {
    const open = (e: MouseEvent, id: string) => {
      e.preventDefault();
      this._opts.onOpen?.(id);
    };
    const run = (id: string) =>
      this._opts.onOpen
        ? h('a', { class: 'jp-GpuPlat-runLink', href: '#', 'data-run-id': id, title: `Open run ${id}`, onclick: (e: MouseEvent) => open(e, id) }, id)
        : h('span', { 'data-run-id': id }, id);
    return h(
      'figure',
      { class: 'jp-GpuPlat-insightsFigure', 'data-table': 'idle' },
      h('figcaption', null, idleTitle(busyPercent)),
      holders.length
        ? h(
            'ol',
            { class: 'jp-GpuPlat-idleHolders' },
            ...holders.map(x =>
              h(
                'li',
                { class: 'jp-GpuPlat-idleHolder', 'data-user': x.user, 'data-project': x.project },
                h('span', { class: 'jp-GpuPlat-idleHolderText' }, idleHolderText(x)),
                h(
                  'ul',
                  { class: 'jp-GpuPlat-idleRuns' },
                  ...x.worstRuns.map(r => h('li', { class: 'jp-GpuPlat-idleRun' }, run(r.id), idleRunText(r)))
                )
              )
            )
          )
        : h('div', { class: 'jp-GpuPlat-muted' }, 'No idle GPU time measured.')
    );
  }

  private _queue(q: IQueueInsight): HTMLElement {
    return h(
      'section',
      { class: 'jp-GpuPlat-insightsQueue', 'data-queue': q.queue, 'aria-label': `Queue ${q.queue}` },
      h(
        'h3',
        { class: 'jp-GpuPlat-sectionTitle' },
        `${q.queue}`,
        h(
          'span',
          { class: 'jp-GpuPlat-muted' },
          ` · ${q.runs} runs · ${formatHours(q.gpuHours)} GPU-hours · utilisation ${formatPercent(q.utilisation)}`
        )
      ),
      busyLine('queue', q.gpuHours, q.busy, null),
      figure('Waits (p50 / p90 / p99)', 'waits', barChart(waitBars(q))),
      figure(
        'Waited on (by reason)',
        'reasons',
        q.waitsByReason.length ? barChart(reasonBars(q)) : h('div', { class: 'jp-GpuPlat-muted' }, 'No waiting.')
      ),
      ...(q.flavors.length ? [flavorFigure('Per flavor (in the order it tries them)', 'queueFlavors', q.flavors)] : [])
    );
  }

  private _scope: HTMLSelectElement;
  private _since: HTMLSelectElement;
  private _error: HTMLElement;
  private _body: HTMLElement;
  private _options: IScopeOption[] = [];
  private _data: IInsightsView | null = null;
}

/** "1.00 GPU-hours held · busy 0.50 of 0.75 measured GPU-hours (67%)" (absent without busy figures). */
function busyLine(view: string, held: number, busy: IBusy | null, threshold: string | null): HTMLElement | null {
  if (busy === null) {
    return null;
  }
  return h(
    'div',
    { class: 'jp-GpuPlat-insightsBusy', 'data-view': view, 'data-measured': String(busy.busy !== null) },
    `${formatHours(held)} GPU-hours held · ${busyText(busy)}`,
    threshold ? h('span', { class: 'jp-GpuPlat-muted' }, ` · busy: ${threshold}`) : null
  );
}

function present(el: HTMLElement | null): HTMLElement[] {
  return el ? [el] : [];
}

function figure(title: string, kind: string, ...children: Array<Node | null>): HTMLElement {
  return h('figure', { class: 'jp-GpuPlat-insightsFigure', 'data-chart': kind }, h('figcaption', null, title), ...children);
}

function barChart(rows: IBar[]): HTMLElement {
  return h(
    'div',
    { class: 'jp-GpuPlat-bars', role: 'list' },
    ...rows.map(b => {
      const bar = h('div', { class: 'jp-GpuPlat-meterBar' });
      bar.style.width = `${Math.round(b.fraction * 100)}%`;
      return h(
        'div',
        { class: 'jp-GpuPlat-barRow', role: 'listitem', 'data-label': b.label, 'aria-label': `${b.label}: ${b.text}` },
        h('span', { class: 'jp-GpuPlat-barLabel' }, b.label),
        h('div', { class: 'jp-GpuPlat-meterTrack' }, bar),
        h('span', { class: 'jp-GpuPlat-barText' }, b.text)
      );
    })
  );
}

function usageChart(usage: IUsage[]): HTMLElement {
  const p = usagePaths(usage, W, H);
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', `-2 -2 ${W + 4} ${H + 4}`);
  svg.setAttribute('class', 'jp-GpuPlat-chart');
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', `GPU-hours per bucket, max ${formatHours(p.max)}`);
  for (const [d, cls] of [
    [p.allowance, 'jp-GpuPlat-chartQuota'],
    [p.used, 'jp-GpuPlat-chartLine']
  ]) {
    if (d) {
      const path = document.createElementNS(SVG, 'path');
      path.setAttribute('d', d);
      path.setAttribute('class', cls);
      svg.append(path);
    }
  }
  return h(
    'div',
    null,
    svg,
    h('div', { class: 'jp-GpuPlat-muted' }, `used (solid) vs quota allowance (dashed) · max ${formatHours(p.max)} GPU-h a bucket`)
  );
}

/** The flavors' figures as the service gave them, in its order (absent where there are no flavors). */
function flavorFigure(title: string, kind: string, flavors: IFlavorInsight[]): HTMLElement {
  const t = flavorTable(flavors);
  return table(title, kind, t.head, t.rows);
}

function countTable(title: string, kind: string, head: string, rows: ICount[]): HTMLElement {
  return table(
    title,
    kind,
    [head, 'Count'],
    rows.map(r => [r.key, String(r.count)])
  );
}

function table(title: string, kind: string, head: string[], rows: string[][]): HTMLElement {
  return h(
    'figure',
    { class: 'jp-GpuPlat-insightsFigure', 'data-table': kind },
    h('figcaption', null, title),
    rows.length
      ? h(
          'table',
          { class: 'jp-GpuPlat-configTable' },
          h('thead', null, h('tr', null, ...head.map(c => h('th', null, c)))),
          h('tbody', null, ...rows.map(r => h('tr', { 'data-key': r[0] }, ...r.map(c => h('td', null, c)))))
        )
      : h('div', { class: 'jp-GpuPlat-muted' }, 'None.')
  );
}
