/**
 * When a waiting run is expected to start, in its detail: the service's estimate (`eta.text`), what
 * it rests on and when it was computed; or that it is unknown, and why. Hidden when the service says
 * nothing (a run that does not wait, or is not estimated yet).
 */

import { h } from '../dom';
import { IEstimated, estimateView } from '../../models/estimates';

export class EtaPart {
  readonly node = h('div', { class: 'jp-GpuPlat-eta', role: 'group', 'aria-label': 'Expected start', 'aria-live': 'polite' });

  render(x: IEstimated | null): void {
    const v = estimateView(x);
    this.node.hidden = v.state === 'none';
    this.node.dataset.state = v.state;
    if (v.state === 'none') {
      this.node.replaceChildren();
      return;
    }
    const computed = v.computedAt === null ? null : new Date(v.computedAt * 1000).toLocaleTimeString();
    const parts: Array<HTMLElement | null> = [
      h(
        'div',
        { class: 'jp-GpuPlat-etaLine' },
        h('span', { class: 'jp-GpuPlat-etaLabel' }, 'Expected start'),
        h('span', { class: 'jp-GpuPlat-etaText' }, v.text)
      ),
      h('div', { class: 'jp-GpuPlat-etaWhy' }, v.state === 'known' ? `Basis: ${v.why}` : `Why: ${v.why}`),
      computed ? h('div', { class: 'jp-GpuPlat-etaAt' }, `Computed at ${computed}`) : null
    ];
    this.node.replaceChildren(...parts.filter((p): p is HTMLElement => p !== null));
  }
}
