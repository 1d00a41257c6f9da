import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, type Inputs, type Outputs } from '../api.js';
import { Link, navigate } from '../router.js';
import { describeStep, sequenceTone } from '../steps.js';
import { Area, Badge, ErrorBox, Field, Loading, Notice, Page, Select, Table, usePaged, when } from '../ui.js';
import { Enrolments } from './enrolments.js';

type Sequence = Outputs['sequences']['get'];
const trigger = (s: Pick<Sequence, 'trigger'>) =>
  s.trigger.type === 'event' ? `Event “${s.trigger.event}”` : 'A send naming it';

/** The account's sequences (the API answers them whole: paged here), and a form for a new one. */
export function Sequences() {
  const list = useQuery({ queryKey: ['sequences'], queryFn: () => api.sequences.list.query() });
  const { slice, controls } = usePaged(list.data);
  return (
    <Page title="Sequences">
      <p>
        Drip flows: a trigger enrolls a contact, who then goes through the steps.{' '}
        <Link to="/events">Application events</Link> trigger and wake them.
      </p>
      {list.isPending ? <Loading /> : <ErrorBox error={list.error} />}
      {list.data && list.data.length === 0 && <p>No sequences yet.</p>}
      {slice.length > 0 && (
        <Table label="Sequences" head={['Name', 'Status', 'Trigger', 'Steps', 'Version', 'Updated']}>
          {slice.map((s) => (
            <tr key={s.id}>
              <td>
                <Link to={`/sequences/${s.id}`}>{s.name}</Link>
              </td>
              <td>
                <Badge tone={sequenceTone(s.status)}>{s.status}</Badge>
              </td>
              <td>{trigger(s)}</td>
              <td>{s.steps.length}</td>
              <td>{s.version}</td>
              <td>{when(s.updatedAt)}</td>
            </tr>
          ))}
        </Table>
      )}
      {controls}
      <SequenceForm />
    </Page>
  );
}

const EXAMPLE_STEPS = `[
  {"type": "send", "subject": "Welcome {{first_name}}", "text": "Glad you are here."},
  {"type": "wait_for_event", "event": "activated", "timeout": "3d", "onArrived": "exit"},
  {"type": "send", "subject": "Need a hand?", "text": "Reply to this mail."}
]`;

/** JSON text → value, or the reason it is not JSON (shown before anything is sent). */
function parseJson(what: string, text: string): { value: unknown } | { problem: string } {
  if (!text.trim()) return { value: undefined };
  try {
    return { value: JSON.parse(text) };
  } catch (err) {
    return { problem: `${what} is not valid JSON: ${(err as Error).message}` };
  }
}

/** Create a sequence, or edit one (only the fields that changed are sent, so an unchanged definition adds no version). */
function SequenceForm({ sequence, onDone }: { sequence?: Sequence; onDone?: () => void }) {
  const qc = useQueryClient();
  const [f, setF] = useState({
    name: sequence?.name ?? '',
    from: sequence?.from ?? '',
    replyTo: sequence?.replyTo ?? '',
    status: 'draft',
    triggerType: sequence?.trigger.type ?? 'event',
    event: sequence?.trigger.event ?? '',
    input: sequence?.input ? JSON.stringify(sequence.input, null, 2) : '',
    steps: sequence ? JSON.stringify(sequence.steps, null, 2) : EXAMPLE_STEPS,
  });
  const [problem, setProblem] = useState<string>();
  const set = (k: keyof typeof f) => (e: { target: { value: string } }) => setF({ ...f, [k]: e.target.value });
  const save = useMutation({
    mutationFn: (body: Inputs['sequences']['create']) => {
      if (!sequence) return api.sequences.create.mutate(body);
      const patch: Inputs['sequences']['update'] = { id: sequence.id };
      if (body.name !== sequence.name) patch.name = body.name;
      if (body.from !== sequence.from) patch.from = body.from;
      if ((body.replyTo ?? '') !== (sequence.replyTo ?? '')) patch.replyTo = body.replyTo;
      if (JSON.stringify(body.trigger) !== JSON.stringify(sequence.trigger)) patch.trigger = body.trigger;
      if (JSON.stringify(body.input ?? {}) !== JSON.stringify(sequence.input ?? {})) patch.input = body.input ?? {};
      if (JSON.stringify(body.steps) !== JSON.stringify(sequence.steps)) patch.steps = body.steps;
      return api.sequences.update.mutate(patch);
    },
    onSuccess: (s) => {
      void qc.invalidateQueries({ queryKey: ['sequences'] });
      qc.setQueryData(['sequence', s.id], s);
      if (onDone) onDone();
      else navigate(`/sequences/${s.id}`);
    },
  });
  const submit = () => {
    setProblem(undefined);
    save.reset();
    const steps = parseJson('Steps', f.steps);
    const input = parseJson('Input', f.input);
    if ('problem' in steps) return setProblem(steps.problem);
    if ('problem' in input) return setProblem(input.problem);
    save.mutate({
      name: f.name,
      from: f.from,
      replyTo: f.replyTo || undefined,
      status: sequence ? undefined : (f.status as 'draft' | 'active'),
      trigger: f.triggerType === 'event' ? { type: 'event', event: f.event } : { type: 'send' },
      input: input.value as Inputs['sequences']['create']['input'],
      steps: steps.value as Inputs['sequences']['create']['steps'],
    });
  };
  return (
    <form
      className="card"
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      <h2>{sequence ? 'Edit sequence' : 'New sequence'}</h2>
      <Field label="Name" required value={f.name} onChange={set('name')} />
      <Field
        label="From"
        required
        placeholder="Acme <hello@your-domain>"
        value={f.from}
        onChange={set('from')}
        hint="On a verified sending domain."
      />
      <Field label="Reply-To" value={f.replyTo} onChange={set('replyTo')} />
      <Select
        label="Trigger"
        value={f.triggerType}
        onChange={set('triggerType')}
        options={[
          ['event', 'An application event'],
          ['send', 'A send naming the sequence'],
        ]}
      />
      {f.triggerType === 'event' && (
        <Field label="Trigger event name" required placeholder="signup" value={f.event} onChange={set('event')} />
      )}
      {!sequence && (
        <Select
          label="Status"
          value={f.status}
          onChange={set('status')}
          options={[
            ['draft', 'Draft (enrolls nobody yet)'],
            ['active', 'Active'],
          ]}
        />
      )}
      <Area
        label="Input signature (JSON, optional)"
        rows={2}
        value={f.input}
        onChange={set('input')}
        placeholder='{"plan": "string"}'
        hint="Names and types (string, number, boolean) read in steps as {{input.name}}."
      />
      <Area
        label="Steps (JSON)"
        rows={10}
        required
        value={f.steps}
        onChange={set('steps')}
        spellCheck={false}
        hint="An array of steps: send (subject and text or html, or templateId), wait (duration like 2h), wait_for_event (event, timeout, onArrived, onTimeout), exit. Durations are milliseconds or text like 30s, 10m, 2h, 7d."
      />
      {problem && (
        <p className="error" role="alert">
          {problem}
        </p>
      )}
      <ErrorBox error={save.error} />
      <div className="row">
        <button type="submit" disabled={save.isPending}>
          {sequence ? 'Save changes' : 'Create sequence'}
        </button>
        {onDone && (
          <button type="button" className="small" onClick={onDone}>
            Cancel editing
          </button>
        )}
      </div>
    </form>
  );
}

const CHANGES: Record<string, readonly (readonly ['active' | 'paused' | 'archived', string])[]> = {
  draft: [['active', 'Activate']],
  active: [
    ['paused', 'Pause'],
    ['archived', 'Archive'],
  ],
  paused: [
    ['active', 'Resume'],
    ['archived', 'Archive'],
  ],
  archived: [['active', 'Activate again']],
};

/** One sequence: what it does, its status changes, an editor, and its enrolments. */
export function SequenceDetail({ id }: { id: string }) {
  const qc = useQueryClient();
  const seq = useQuery({ queryKey: ['sequence', id], queryFn: () => api.sequences.get.query({ id }) });
  const [editing, setEditing] = useState(false);
  const changed = (s: Sequence) => {
    qc.setQueryData(['sequence', id], s);
    void qc.invalidateQueries({ queryKey: ['sequences'] });
  };
  const status = useMutation({
    mutationFn: (to: 'active' | 'paused' | 'archived') => api.sequences.update.mutate({ id, status: to }),
    onSuccess: changed,
  });
  const remove = useMutation({
    mutationFn: () => api.sequences.delete.mutate({ id }),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['sequences'] });
      navigate('/sequences');
    },
  });
  if (!seq.data) return <Page title="Sequence">{seq.isPending ? <Loading /> : <ErrorBox error={seq.error} />}</Page>;
  const s = seq.data;
  return (
    <Page title={s.name}>
      <p>
        <Link to="/sequences">All sequences</Link>
      </p>
      <dl className="facts">
        <dt>Status</dt>
        <dd>
          <Badge tone={sequenceTone(s.status)}>{s.status}</Badge>
        </dd>
        <dt>Trigger</dt>
        <dd>{trigger(s)}</dd>
        <dt>Version</dt>
        <dd>
          {s.version} <small>(running enrolments keep the version they began on)</small>
        </dd>
        <dt>From</dt>
        <dd>
          {s.from}
          {s.replyTo ? ` · Reply-To ${s.replyTo}` : ''}
        </dd>
        {s.input && Object.keys(s.input).length > 0 && (
          <>
            <dt>Input</dt>
            <dd>
              {Object.entries(s.input)
                .map(([k, t]) => `${k} (${t})`)
                .join(', ')}
            </dd>
          </>
        )}
        <dt>Id</dt>
        <dd>
          <code>{s.id}</code>
        </dd>
        <dt>Updated</dt>
        <dd>{when(s.updatedAt)}</dd>
      </dl>
      <div className="row" role="group" aria-label="Status">
        {(CHANGES[s.status] ?? []).map(([to, label]) => (
          <button
            key={to}
            type="button"
            className={to === 'archived' ? 'danger' : undefined}
            onClick={() => status.mutate(to)}
            disabled={status.isPending}
          >
            {label}
          </button>
        ))}
        {s.status === 'draft' && (
          <button type="button" className="danger" onClick={() => remove.mutate()} disabled={remove.isPending}>
            Delete draft
          </button>
        )}
        {!editing && (
          <button type="button" onClick={() => setEditing(true)}>
            Edit
          </button>
        )}
      </div>
      {status.isSuccess && <Notice>Now {status.data.status}.</Notice>}
      <ErrorBox error={status.error ?? remove.error} />
      <h2 id="steps-h">Steps (version {s.version})</h2>
      <ol aria-labelledby="steps-h" className="steps">
        {s.steps.map((step, i) => (
          <li key={i}>
            {typeof step.id === 'string' ? (
              <>
                <code>{step.id}</code>:{' '}
              </>
            ) : null}
            {describeStep(step)}
          </li>
        ))}
      </ol>
      {editing && <SequenceForm key={`${s.id}-${s.version}`} sequence={s} onDone={() => setEditing(false)} />}
      <Enrolments sequence={s} />
    </Page>
  );
}
