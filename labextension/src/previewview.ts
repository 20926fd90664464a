/** The submit preview as the user reads it: the policy's verdict, a 0-GPU note, the layered config. */

import { configTable, h } from './dom';
import type { IPreview } from './types';
import { configRows, noGpuNote } from './viewmodel';

/** The verdict (each refusing rule with its hint), "no GPU" when so, the layers and the resolved config. */
export function previewParts(p: IPreview): HTMLElement[] {
  const ok = p.verdict.allowed;
  const verdict = h(
    'div',
    { class: `jp-GpuPlat-verdict ${ok ? 'jp-mod-allowed' : 'jp-mod-refused'}` },
    h('div', { class: 'jp-GpuPlat-verdictTitle' }, ok ? '✓ Policy allows this run' : '✕ Policy would refuse this run'),
    ...p.verdict.violations.map(v =>
      h(
        'div',
        { class: 'jp-GpuPlat-violation', 'data-code': v.code },
        h('div', { class: 'jp-GpuPlat-errorMessage' }, v.message),
        v.hint ? h('div', { class: 'jp-GpuPlat-errorHint' }, v.hint) : null
      )
    )
  );
  const noGpu = noGpuNote(p.resolved);
  return [
    verdict,
    ...(noGpu ? [h('div', { class: 'jp-GpuPlat-noGpu', role: 'note' }, noGpu)] : []),
    h('div', { class: 'jp-GpuPlat-muted' }, `Layers, weakest first: ${p.layers.join(' < ')}`),
    configTable(configRows(p.resolved, p.provenance))
  ];
}
