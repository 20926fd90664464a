/**
 * What-if form of the Insights tab: replay a queue's recorded period under changed
 * settings (`POST whatif`) and show predicted beside observed waits and utilisation,
 * with the model's assumptions. A refused request shows the service's message and hint.
 */

import { errorBox, h } from '../dom';
import type { InsightsSource } from '../../models/insightssource';
import {
  IWhatIfView,
  ORDERINGS,
  WHATIF_FIELDS,
  WhatIfField,
  normalizeWhatIf,
  whatifBody
} from '../../models/whatifmodel';
import type { SinceChoice } from '../../models/insightsmodel';

const LABELS: Record<WhatIfField, string> = {
  concurrency: 'Concurrency',
  quota_gpu: 'GPU quota',
  priority: 'Priority',
  max_per_user: 'Max per user'
};

export interface IWhatIfOptions {
  source: InsightsSource;
  clockOffset: () => number;
}

export class WhatIfForm {
  constructor(private _opts: IWhatIfOptions) {
    this._queue = h('select', { class: 'jp-GpuPlat-select', name: 'queue', 'aria-label': 'What-if queue' });
    this._inputs = {} as Record<WhatIfField, HTMLInputElement>;
    const fields = WHATIF_FIELDS.map(f => {
      const input = h('input', {
        class: 'jp-GpuPlat-input',
        name: f,
        type: 'text',
        inputmode: 'numeric',
        placeholder: 'unchanged',
        'aria-label': LABELS[f]
      });
      this._inputs[f] = input;
      return h('label', { class: 'jp-GpuPlat-whatifField' }, h('span', null, LABELS[f]), input);
    });
    this._flavors = h('input', {
      class: 'jp-GpuPlat-input',
      name: 'flavors',
      type: 'text',
      placeholder: 'e.g. h100=4',
      'aria-label': 'Flavor GPU quotas'
    });
    this._ordering = h(
      'select',
      { class: 'jp-GpuPlat-select', name: 'ordering', 'aria-label': 'Ordering' },
      ...ORDERINGS.map(o => h('option', { value: o }, o || 'unchanged'))
    );
    this._result = h('div', { class: 'jp-GpuPlat-whatifResult', 'aria-live': 'polite' });
    this._run = h('button', { class: 'jp-GpuPlat-button jp-mod-accept jp-GpuPlat-whatifRun', type: 'submit' }, 'Run what-if');
    const form = h(
      'form',
      { class: 'jp-GpuPlat-whatifForm', 'aria-label': 'What-if limits' },
      h('label', { class: 'jp-GpuPlat-whatifField' }, h('span', null, 'Queue'), this._queue),
      ...fields,
      h('label', { class: 'jp-GpuPlat-whatifField' }, h('span', null, 'Flavor GPU quotas'), this._flavors),
      h('label', { class: 'jp-GpuPlat-whatifField' }, h('span', null, 'Ordering'), this._ordering),
      this._run
    );
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      void this.submit();
    });
    this.node = h(
      'section',
      { class: 'jp-GpuPlat-section jp-GpuPlat-whatif', 'aria-label': 'What-if limits' },
      h('h3', { class: 'jp-GpuPlat-sectionTitle' }, 'What if the limits were different?'),
      h('div', { class: 'jp-GpuPlat-muted' }, 'Replays the recorded arrivals of the range above through the admission code with these settings.'),
      form,
      this._result
    );
  }

  readonly node: HTMLElement;
  since: SinceChoice = '7d';

  setQueues(names: string[]): void {
    const keep = this._queue.value;
    this._queue.replaceChildren(...[...names].sort().map(n => h('option', { value: n }, n)));
    if (names.includes(keep)) {
      this._queue.value = keep;
    }
  }

  async submit(): Promise<void> {
    const values: Partial<Record<WhatIfField, string>> = {};
    for (const f of WHATIF_FIELDS) {
      values[f] = this._inputs[f].value;
    }
    const queue = this._queue.value;
    const { body, error } = whatifBody({
      queue,
      since: this.since,
      values,
      ordering: this._ordering.value,
      flavors: this._flavors.value
    });
    if (!body) {
      this._result.replaceChildren(errorBox({ message: error }));
      return;
    }
    this._run.disabled = true;
    this._result.replaceChildren(h('div', { class: 'jp-GpuPlat-muted' }, 'Replaying…'));
    try {
      this._render(normalizeWhatIf(await this._opts.source.whatif(body), queue));
    } catch (e) {
      this._result.replaceChildren(errorBox(e));
    } finally {
      this._run.disabled = false;
    }
  }

  private _render(v: IWhatIfView): void {
    const mark = (c: number) => (c < 0 ? ' jp-mod-better' : c > 0 ? ' jp-mod-worse' : '');
    const parts: Array<HTMLElement | null> = [
      v.runs !== null
        ? h(
            'div',
            { class: 'jp-GpuPlat-muted jp-GpuPlat-whatifSettings' },
            `${v.runs} recorded runs replayed` + (v.settings.length ? ` with ${v.settings.join(', ')}` : ' with the recorded settings')
          )
        : null,
      h(
        'table',
        { class: 'jp-GpuPlat-configTable jp-GpuPlat-whatifTable' },
        h('thead', null, h('tr', null, h('th', null, ''), h('th', null, 'Observed'), h('th', null, 'Predicted'))),
        h(
          'tbody',
          null,
          ...v.rows.map(r =>
            h(
              'tr',
              { 'data-row': r.label },
              h('td', null, r.label),
              h('td', { class: 'jp-GpuPlat-whatifObserved' }, r.observed),
              h('td', { class: `jp-GpuPlat-whatifPredicted${mark(r.change)}` }, r.predicted)
            )
          )
        )
      ),
      v.binding ? h('div', { class: 'jp-GpuPlat-muted jp-GpuPlat-whatifBinding' }, `Binds in the replay: ${v.binding}`) : null,
      v.notes.length ? h('ul', { class: 'jp-GpuPlat-whatifNotes' }, ...v.notes.map(n => h('li', null, n))) : null,
      v.assumptions.length
        ? h(
            'div',
            { class: 'jp-GpuPlat-whatifAssumptions' },
            h('div', null, 'Assumptions'),
            h('ul', null, ...v.assumptions.map(a => h('li', null, a)))
          )
        : null
    ];
    this._result.replaceChildren(...parts.filter((x): x is HTMLElement => x !== null));
  }

  private _queue: HTMLSelectElement;
  private _inputs: Record<WhatIfField, HTMLInputElement>;
  private _flavors: HTMLInputElement;
  private _ordering: HTMLSelectElement;
  private _result: HTMLElement;
  private _run: HTMLButtonElement;
}
