import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from '@temporalio/worker';
import { describe, expect, inject, it } from 'vitest';
import * as workflows from '../workflows/index.js';
import { HISTORIES_DIR, HISTORY_EXT, readHistory } from './helpers/histories.js';

/**
 * Workflow changes stay safe (DESIGN.md, Delivery semantics): one recorded history of every workflow
 * type (test/histories/, recorded from the integration tests with RECORD_HISTORIES=1) replays against
 * the current bundle. A change that alters the command sequence fails here until it goes behind patched().
 */
describe('workflow histories replay against the current code', () => {
  const files = readdirSync(HISTORIES_DIR).filter((f) => f.endsWith(HISTORY_EXT));

  it('has a recorded history of every workflow type', () => {
    // `<type>.binpb` is what RECORD_HISTORIES=1 keeps; `<type>.<case>.binpb` is a further path of that
    // type recorded on purpose: deliverOutboundWorkflow.throttled (a batch waiting for its site on a
    // timer, then sending), sweepOutboundWorkflow.handover (a stranded batch started, not awaited).
    const recorded = [...new Set(files.map((f) => f.slice(0, -HISTORY_EXT.length).split('.')[0]!))].sort();
    expect(recorded).toEqual(Object.keys(workflows).sort());
    expect(files).toEqual(
      expect.arrayContaining(['deliverOutboundWorkflow.throttled.binpb', 'sweepOutboundWorkflow.handover.binpb']),
    );
  });

  it('replays every recorded history without nondeterminism', async () => {
    const histories = files.map((f) => ({ workflowId: f, history: readHistory(readFileSync(join(HISTORIES_DIR, f))) }));
    const failures: string[] = [];
    for await (const r of Worker.runReplayHistories(
      { workflowBundle: { codePath: inject('workflowBundlePath') } },
      histories,
    )) {
      if (r.error) failures.push(`${r.workflowId}: ${r.error.message}`);
    }
    expect(failures).toEqual([]);
    expect(histories.length).toBeGreaterThan(0);
  });
});
