import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, type Outputs } from '../api.js';
import { Badge, ErrorBox, Field, Loading, Notice, Select, Table, when } from '../ui.js';

type Policy = Outputs['inboundPolicy']['get']['policy'];
type RuleKind = 'address' | 'domain' | 'ip';
type RuleAction = 'block' | 'allow';

/** A domain's inbound policy (spam thresholds, DMARC p=reject) and its sender rules (docs/inbound-policy.md). */
export function InboundPolicy({ domainId }: { domainId: string }) {
  const policy = useQuery({
    queryKey: ['inbound-policy', domainId],
    queryFn: () => api.inboundPolicy.get.query({ id: domainId }),
  });
  return (
    <section aria-labelledby="policy-h">
      <h2 id="policy-h">Inbound policy</h2>
      <p>
        What this domain refuses or holds. Held mail waits on the Inbound page until released or deleted; unscored mail
        (no spam filter answer) is never held or refused for its score.
      </p>
      {policy.isPending ? <Loading /> : <ErrorBox error={policy.error} />}
      {policy.data && <PolicyForm policy={policy.data.policy} />}
      <SenderRules domainId={domainId} />
    </section>
  );
}

const scoreText = (s: number | null) => (s === null ? '' : String(s));
const scoreOf = (text: string) => (text.trim() === '' ? null : Number(text));

function PolicyForm({ policy }: { policy: Policy }) {
  const qc = useQueryClient();
  const [hold, setHold] = useState(scoreText(policy.spam_hold_score));
  const [refuse, setRefuse] = useState(scoreText(policy.spam_refuse_score));
  const [dmarc, setDmarc] = useState(policy.refuse_dmarc_reject);
  const save = useMutation({
    mutationFn: () =>
      api.inboundPolicy.update.mutate({
        id: policy.domain_id,
        spam_hold_score: scoreOf(hold),
        spam_refuse_score: scoreOf(refuse),
        refuse_dmarc_reject: dmarc,
      }),
    onSuccess: (r) => qc.setQueryData(['inbound-policy', policy.domain_id], r),
  });
  const saved = save.data?.policy;
  return (
    <form
      className="narrow"
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate();
      }}
    >
      <Field
        label="Hold score"
        type="number"
        step="any"
        min={-1000}
        max={1000}
        placeholder="never"
        value={hold}
        onChange={(e) => setHold(e.target.value)}
        hint="Mail scoring at or above this is held (quarantine). Empty: never."
      />
      <Field
        label="Refuse score"
        type="number"
        step="any"
        min={-1000}
        max={1000}
        placeholder="never"
        value={refuse}
        onChange={(e) => setRefuse(e.target.value)}
        hint="Mail scoring at or above this is refused with 550 5.7.1. Empty: never."
      />
      <label className="check">
        <input type="checkbox" checked={dmarc} onChange={(e) => setDmarc(e.target.checked)} /> Refuse mail that fails
        DMARC when its From domain publishes p=reject
      </label>
      <ErrorBox error={save.error} />
      {saved && (
        <Notice>
          Policy saved: hold {saved.spam_hold_score === null ? 'never' : `at ${saved.spam_hold_score}`}, refuse{' '}
          {saved.spam_refuse_score === null ? 'never' : `at ${saved.spam_refuse_score}`}, DMARC p=reject{' '}
          {saved.refuse_dmarc_reject ? 'refused' : 'not refused'}.
        </Notice>
      )}
      <button type="submit" disabled={save.isPending}>
        Save policy
      </button>
    </form>
  );
}

const KINDS = [
  ['address', 'Address'],
  ['domain', 'Domain (and its subdomains)'],
  ['ip', 'IP address or CIDR'],
] as const;
const PLACEHOLDERS: Record<RuleKind, string> = {
  address: 'spammer@bad.example',
  domain: 'bad.example',
  ip: '192.0.2.0/24',
};

function SenderRules({ domainId }: { domainId: string }) {
  const qc = useQueryClient();
  const rules = useQuery({
    queryKey: ['sender-rules', domainId],
    queryFn: () => api.senderRules.list.query({ id: domainId }),
  });
  const refresh = () => void qc.invalidateQueries({ queryKey: ['sender-rules', domainId] });
  const [kind, setKind] = useState<RuleKind>('address');
  const [value, setValue] = useState('');
  const [action, setAction] = useState<RuleAction>('block');
  const add = useMutation({
    mutationFn: () => api.senderRules.create.mutate({ id: domainId, kind, value: value.trim(), action }),
    onSuccess: () => {
      setValue('');
      refresh();
    },
  });
  const remove = useMutation({
    mutationFn: (ruleId: string) => api.senderRules.delete.mutate({ id: domainId, ruleId }),
    onSuccess: refresh,
  });
  const list = rules.data?.data ?? [];
  return (
    <>
      <h3>Sender rules</h3>
      <p>
        A blocked sender is refused at SMTP. An allowed one (by envelope sender or IP) passes every block rule and the
        spam and DMARC thresholds.
      </p>
      {rules.isPending ? <Loading /> : <ErrorBox error={rules.error ?? remove.error} />}
      {rules.data && list.length === 0 && <p>No sender rules yet.</p>}
      {list.length > 0 && (
        <Table label="Sender rules" head={['Kind', 'Value', 'Action', 'Added by', 'Added', '']}>
          {list.map((r) => (
            <tr key={r.id}>
              <td>{r.kind}</td>
              <td className="wrap">
                <code>{r.value}</code>
              </td>
              <td>
                <Badge tone={r.action === 'block' ? 'bad' : 'ok'}>{r.action}</Badge>
              </td>
              <td>{r.origin === 'webhook-reply' ? 'webhook reply' : 'API or dashboard'}</td>
              <td>{when(r.created_at)}</td>
              <td>
                <button
                  type="button"
                  className="small danger"
                  disabled={remove.isPending}
                  onClick={() => remove.mutate(r.id)}
                  aria-label={`Delete rule ${r.action} ${r.value}`}
                >
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      <form
        className="card"
        onSubmit={(e) => {
          e.preventDefault();
          add.mutate();
        }}
      >
        <h4>Add a sender rule</h4>
        <Select label="Kind" value={kind} onChange={(e) => setKind(e.target.value as RuleKind)} options={KINDS} />
        <Field
          label="Sender"
          required
          placeholder={PLACEHOLDERS[kind]}
          value={value}
          onChange={(e) => setValue(e.target.value)}
        />
        <Select
          label="Rule action"
          value={action}
          onChange={(e) => setAction(e.target.value as RuleAction)}
          options={[
            ['block', 'Block'],
            ['allow', 'Allow'],
          ]}
        />
        <ErrorBox error={add.error} />
        {add.data && (
          <Notice>
            Rule added: {add.data.rule.action} {add.data.rule.value}.
          </Notice>
        )}
        <button type="submit" disabled={add.isPending}>
          Add rule
        </button>
      </form>
    </>
  );
}
