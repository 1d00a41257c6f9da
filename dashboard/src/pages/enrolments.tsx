import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, type Outputs } from '../api.js';
import { Link } from '../router.js';
import { describeStep, enrolmentTone, outcomeTone } from '../steps.js';
import { Badge, ErrorBox, Loading, Page, Select, Table, when } from '../ui.js';

type Sequence = Outputs['sequences']['get'];
/** Why it ended, when that says more than its status (an exit for an unsubscribe, say). */
const reason = (e: { status: string; exitReason: string | null }) =>
  e.exitReason && e.exitReason !== e.status ? ` (${e.exitReason})` : '';
type Status = NonNullable<Parameters<typeof api.sequences.enrolments.query>[0]>['status'];
const PAGE = 20;
const STATUSES = [
  ['', 'Any status'],
  ['running', 'Running'],
  ['completed', 'Completed'],
  ['exited', 'Exited'],
  ['canceled', 'Canceled'],
  ['failed', 'Failed'],
] as const;

/** Where an enrolment is, in a few words (from the stored record; the detail page asks the running workflow). */
function position(e: { status: string; currentStep: number | null; waitingFor: string | null }, total?: number) {
  if (e.status !== 'running' || e.currentStep == null) return '—';
  const step = `Step ${e.currentStep + 1}${total ? ` of ${total}` : ''}`;
  return e.waitingFor ? `${step}, waiting for “${e.waitingFor}”` : step;
}

/** Enrolments of a sequence, newest first: filtered by status, paged by the API's `before` cursor, re-read every 3 s. */
export function Enrolments({ sequence }: { sequence: Sequence }) {
  const [status, setStatus] = useState('');
  const [cursors, setCursors] = useState<string[]>([]);
  const before = cursors.at(-1);
  const list = useQuery({
    queryKey: ['enrolments', sequence.id, status, before],
    queryFn: () =>
      api.sequences.enrolments.query({ id: sequence.id, status: (status || undefined) as Status, before, limit: PAGE }),
    placeholderData: keepPreviousData,
    refetchInterval: 3_000,
  });
  const rows = list.data ?? [];
  return (
    <section aria-labelledby="enrolments-h">
      <h2 id="enrolments-h">Enrolments</h2>
      <div className="row">
        <Select
          label="Show enrolments"
          value={status}
          onChange={(e) => {
            setCursors([]);
            setStatus(e.target.value);
          }}
          options={STATUSES}
        />
      </div>
      {list.isPending ? <Loading /> : <ErrorBox error={list.error} />}
      {list.data && rows.length === 0 && <p>No enrolments{status ? ` ${status}` : ''} yet.</p>}
      {rows.length > 0 && (
        <Table label="Enrolments" head={['Contact', 'Status', 'Where', 'Version', 'Started', 'Ended']}>
          {rows.map((e) => (
            <tr key={e.id}>
              <td className="wrap">
                <Link to={`/sequences/${sequence.id}/enrolments/${e.id}`}>{e.email}</Link>
              </td>
              <td>
                <Badge tone={enrolmentTone(e.status)}>{e.status}</Badge>
                {reason(e)}
              </td>
              <td>{position(e, e.version === sequence.version ? sequence.steps.length : undefined)}</td>
              <td>{e.version}</td>
              <td>{when(e.createdAt)}</td>
              <td>{when(e.endedAt)}</td>
            </tr>
          ))}
        </Table>
      )}
      <nav className="pager" aria-label="Enrolment pages">
        <button type="button" disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>
          Newer
        </button>
        <span>Page {cursors.length + 1}</span>
        <button type="button" disabled={rows.length < PAGE} onClick={() => setCursors([...cursors, rows.at(-1)!.id])}>
          Older
        </button>
      </nav>
    </section>
  );
}

/** One enrolment: where it is now (live from the workflow while it runs, re-read every 2 s), the steps done, and Cancel. */
export function EnrolmentDetail({ sequenceId, id }: { sequenceId: string; id: string }) {
  const qc = useQueryClient();
  const seq = useQuery({
    queryKey: ['sequence', sequenceId],
    queryFn: () => api.sequences.get.query({ id: sequenceId }),
  });
  const enr = useQuery({
    queryKey: ['enrolment', id],
    queryFn: () => api.enrolments.get.query({ id }),
    refetchInterval: (q) => (q.state.data?.status === 'running' ? 2_000 : false),
  });
  const cancel = useMutation({
    mutationFn: () => api.enrolments.cancel.mutate({ id }),
    onSettled: () => {
      void qc.invalidateQueries({ queryKey: ['enrolment', id] });
      void qc.invalidateQueries({ queryKey: ['enrolments', sequenceId] });
    },
  });
  if (!enr.data) return <Page title="Enrolment">{enr.isPending ? <Loading /> : <ErrorBox error={enr.error} />}</Page>;
  const e = enr.data;
  // Step descriptions come from the sequence when the enrolment runs its current version.
  const steps = seq.data && seq.data.version === e.version ? seq.data.steps : undefined;
  const current = e.currentStep != null ? steps?.[e.currentStep] : undefined;
  const confirmCancel = () => {
    if (window.confirm(`Stop the enrolment of ${e.email}? No further step runs.`)) cancel.mutate();
  };
  return (
    <Page title={`Enrolment of ${e.email}`}>
      <p>
        <Link to={`/sequences/${sequenceId}`}>Back to {seq.data?.name ?? 'the sequence'}</Link>
      </p>
      <dl className="facts">
        <dt>Status</dt>
        <dd>
          <Badge tone={enrolmentTone(e.status)}>{e.status}</Badge>
          {reason(e)}
        </dd>
        <dt>Contact</dt>
        <dd>{e.email}</dd>
        <dt>Version</dt>
        <dd>
          {e.version}
          {seq.data && seq.data.version !== e.version ? ` (the sequence is at version ${seq.data.version} now)` : ''}
        </dd>
        <dt>Started</dt>
        <dd>{when(e.createdAt)}</dd>
        {e.endedAt != null && (
          <>
            <dt>Ended</dt>
            <dd>{when(e.endedAt)}</dd>
          </>
        )}
        <dt>Id</dt>
        <dd>
          <code>{e.id}</code>
        </dd>
      </dl>
      <section aria-labelledby="now-h">
        <h2 id="now-h">Now</h2>
        <div role="status" aria-live="polite">
          {e.status === 'running' ? (
            <>
              <p>
                {e.currentStep != null ? `Step ${e.currentStep + 1}${steps ? ` of ${steps.length}` : ''}` : 'Starting'}
                {current ? `: ${describeStep(current)}` : ''}.
              </p>
              {e.waitingFor && (
                <p>
                  Waiting for the event “{e.waitingFor}”{e.waitUntil ? ` until ${when(e.waitUntil)}` : ''}.
                </p>
              )}
              {!e.waitingFor && e.waitUntil && <p>Waiting until {when(e.waitUntil)}.</p>}
              <p>
                <small>
                  {e.live
                    ? 'Live from the running workflow; updating every 2 s.'
                    : 'From the stored record (the workflow did not answer); updating every 2 s.'}
                </small>
              </p>
            </>
          ) : (
            <p>
              Enrolment {e.status}
              {reason(e)}.
            </p>
          )}
        </div>
        {e.status === 'running' && (
          <button type="button" className="danger" onClick={confirmCancel} disabled={cancel.isPending}>
            Cancel enrolment
          </button>
        )}
        <ErrorBox error={cancel.error} />
      </section>
      <h2 id="done-h">Steps done</h2>
      {e.steps.length === 0 ? (
        <p>None yet.</p>
      ) : (
        <Table label="Steps done" head={['Step', 'What', 'Outcome', 'Began', 'Finished']}>
          {e.steps.map((r, i) => {
            const def = steps?.[r.index];
            const messageId = typeof r.detail?.messageId === 'string' ? r.detail.messageId : undefined;
            return (
              <tr key={i}>
                <td>{r.index + 1}</td>
                <td className="wrap">
                  {def ? describeStep(def) : r.type}
                  {messageId && (
                    <>
                      {' '}
                      · <Link to={`/messages/${messageId}`}>the message</Link>
                    </>
                  )}
                </td>
                <td>
                  <Badge tone={outcomeTone(r.outcome)}>{r.outcome.replace('_', ' ')}</Badge>
                </td>
                <td>{when(r.startedAt)}</td>
                <td>{when(r.at)}</td>
              </tr>
            );
          })}
        </Table>
      )}
      {(Object.keys(e.trigger).length > 0 || Object.keys(e.input).length > 0) && (
        <>
          <h2>Trigger and input</h2>
          <dl className="facts">
            {Object.entries(e.trigger).map(([k, v]) => (
              <Fact key={`t-${k}`} name={`trigger.${k}`} value={v} />
            ))}
            {Object.entries(e.input).map(([k, v]) => (
              <Fact key={`i-${k}`} name={`input.${k}`} value={v} />
            ))}
          </dl>
        </>
      )}
    </Page>
  );
}

function Fact({ name, value }: { name: string; value: unknown }) {
  return (
    <>
      <dt>
        <code>{name}</code>
      </dt>
      <dd>{JSON.stringify(value)}</dd>
    </>
  );
}
