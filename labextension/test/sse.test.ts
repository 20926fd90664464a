import { test } from 'node:test';
import assert from 'node:assert/strict';

import { SSEParser } from '../src/api/sse';

test('events cut anywhere across chunks come out whole', () => {
  const text = 'id: 7\nevent: status\ndata: {"a": 1}\n\n: keep-alive\n\nevent: ready\ndata: {"last_event_id": 7}\n\n';
  for (let cut = 0; cut <= text.length; cut++) {
    const p = new SSEParser();
    const evs = [...p.feed(text.slice(0, cut)), ...p.feed(text.slice(cut))];
    assert.deepEqual(evs, [
      { event: 'status', data: '{"a": 1}', id: '7' },
      { event: 'ready', data: '{"last_event_id": 7}', id: null }
    ]);
    assert.equal(p.lastId, '7');
  }
});

test('multi-line data, CRLF, default event name, empty data lines', () => {
  const p = new SSEParser();
  const evs = p.feed('data: one\r\ndata: two\r\n\r\nid: 12\ndata:\n\n');
  assert.deepEqual(evs, [
    { event: 'message', data: 'one\ntwo', id: null },
    { event: 'message', data: '', id: '12' }
  ]);
});

test('an incomplete event waits for its blank line', () => {
  const p = new SSEParser();
  assert.deepEqual(p.feed('id: 3\ndata: step 0\n'), []);
  assert.deepEqual(p.feed('\n'), [{ event: 'message', data: 'step 0', id: '3' }]);
});
