/** The submit preview as the user reads it: the policy's verdict, the service's notes, where it starts and waits, the layered config. */

import { configTable, h } from '../dom';
import type { IPreview } from '../../api/types';
import { configRows } from '../../models/viewmodel';

/**
 * The verdict (each refusing rule with its hint; a caution, not a plain "allows", when the service
 * adds a note such as "no GPU"), the notes, what it would wait for, its working directory, the
 * layers and the resolved config. All of it as the service answered it.
 */
export function previewParts(p: IPreview): HTMLElement[] {
  const ok = p.verdict.allowed;
  const notes = ok ? p.notes ?? [] : [];
  const caution = ok && notes.length > 0;
  const verdict = h(
    'div',
    { class: `jp-GpuPlat-verdict ${!ok ? 'jp-mod-refused' : caution ? 'jp-mod-caution' : 'jp-mod-allowed'}` },
    h(
      'div',
      { class: 'jp-GpuPlat-verdictTitle' },
      !ok ? '✕ Policy would refuse this run' : caution ? '⚠ Policy allows this run, with a caution' : '✓ Policy allows this run'
    ),
    ...p.verdict.violations.map(v =>
      h(
        'div',
        { class: 'jp-GpuPlat-violation', 'data-code': v.code },
        h('div', { class: 'jp-GpuPlat-errorMessage' }, v.message),
        v.hint ? h('div', { class: 'jp-GpuPlat-errorHint' }, v.hint) : null
      )
    )
  );
  const waits = ok ? p.waits : null;
  return [
    verdict,
    ...notes.map(n => h('div', { class: 'jp-GpuPlat-noGpu', role: 'note' }, n)),
    ...(waits
      ? [
          h(
            'div',
            { class: 'jp-GpuPlat-willWait', role: 'note', 'data-reason': waits.reason },
            `will wait: ${waits.message}, position ${waits.position}`
          )
        ]
      : []),
    // the flavor admission would choose if it were sent now (the service's answer)
    ...(ok && p.flavor ? [h('div', { class: 'jp-GpuPlat-muted jp-GpuPlat-previewFlavor' }, `Starts now on flavor ${p.flavor}`)] : []),
    h(
      'div',
      { class: 'jp-GpuPlat-muted jp-GpuPlat-workingDir' },
      p.working_dir ? `Starts in ${p.working_dir}` : "Starts in the run's own artifact directory"
    ),
    h('div', { class: 'jp-GpuPlat-muted' }, `Layers, weakest first: ${p.layers.join(' < ')}`),
    configTable(configRows(p.resolved, p.provenance))
  ];
}
