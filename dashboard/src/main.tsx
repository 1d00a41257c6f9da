import { QueryClientProvider, useMutation, useQuery } from '@tanstack/react-query';
import { StrictMode, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { api, queryClient } from './api.js';
import { RedeemLink, SignIn, SignUp } from './pages/auth.js';
import { Broadcasts, BroadcastDetail } from './pages/broadcasts.js';
import { Deliverability } from './pages/deliverability.js';
import { DomainDetail, Domains } from './pages/domains.js';
import { EnrolmentDetail } from './pages/enrolments.js';
import { Events } from './pages/events.js';
import { Inbound } from './pages/inbound.js';
import { Keys } from './pages/keys.js';
import { Lists } from './pages/lists.js';
import { MessageDetail, Messages } from './pages/messages.js';
import { Suppressions } from './pages/suppressions.js';
import { SequenceDetail, Sequences } from './pages/sequences.js';
import { Templates } from './pages/templates.js';
import { Usage } from './pages/usage.js';
import { Link, navigate, useLocation } from './router.js';
import { onSessionChange, readSession, saveSession } from './session.js';
import { ErrorBox } from './ui.js';
import './styles.css';

const NAV = [
  ['/', 'Overview'],
  ['/domains', 'Domains'],
  ['/messages', 'Messages'],
  ['/inbound', 'Inbound'],
  ['/keys', 'Keys'],
  ['/templates', 'Templates'],
  ['/suppressions', 'Suppressions'],
  ['/lists', 'Lists'],
  ['/broadcasts', 'Broadcasts'],
  ['/sequences', 'Sequences'],
  ['/events', 'Events'],
  ['/deliverability', 'Deliverability'],
] as const;

function useSession() {
  const [session, setSession] = useState(readSession);
  useEffect(() => onSessionChange(() => setSession(readSession())), []);
  return session;
}

function Routes({ path }: { path: string }) {
  const [, section, id, sub, subId] = path.split('/');
  switch (section) {
    case '':
      return <Usage />;
    case 'domains':
      return id ? <DomainDetail id={id} /> : <Domains />;
    case 'messages':
      return id ? <MessageDetail id={id} /> : <Messages />;
    case 'inbound':
      return <Inbound />;
    case 'keys':
      return <Keys />;
    case 'templates':
      return <Templates />;
    case 'suppressions':
      return <Suppressions />;
    case 'lists':
      return <Lists />;
    case 'broadcasts':
      return id ? <BroadcastDetail id={id} /> : <Broadcasts />;
    case 'sequences':
      if (id && sub === 'enrolments' && subId) return <EnrolmentDetail key={subId} sequenceId={id} id={subId} />;
      return id ? <SequenceDetail key={id} id={id} /> : <Sequences />;
    case 'events':
      return <Events />;
    case 'deliverability':
      return <Deliverability />;
    default:
      return (
        <p>
          Nothing here. <Link to="/">Back to the overview</Link>.
        </p>
      );
  }
}

/** Unverified accounts cannot send: say so on every page, with a way to get a fresh link. */
function VerifyBanner() {
  const me = useQuery({ queryKey: ['me'], queryFn: () => api.me.get.query() });
  const resend = useMutation({ mutationFn: () => api.auth.resendVerification.mutate({}) });
  if (!me.data || me.data.emailVerified) return null;
  return (
    <div className="banner" role="region" aria-label="Email verification">
      <p>Verify {me.data.email} to start sending: open the link we mailed you. Following it signs you in again.</p>
      <button type="button" className="small" onClick={() => resend.mutate()} disabled={resend.isPending}>
        Send a new link
      </button>
      {resend.isSuccess && <span role="status"> Sent.</span>}
      <ErrorBox error={resend.error} />
    </div>
  );
}

function App() {
  const session = useSession();
  const { path, query } = useLocation();
  const signOut = useMutation({
    mutationFn: () => api.auth.signout.mutate({}),
    onSettled: () => {
      saveSession(undefined);
      queryClient.clear();
      navigate('/signin');
    },
  });
  const publicPage =
    path === '/signup' ? (
      <SignUp />
    ) : path === '/verify' ? (
      <RedeemLink kind="verify" />
    ) : path === '/signin' && (query.has('token') || query.has('done')) ? (
      <RedeemLink kind="signin" />
    ) : undefined;
  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header>
        <Link to="/" className="brand">
          svc-mail
        </Link>
        {session && (
          <nav aria-label="Main">
            <ul>
              {NAV.map(([to, label]) => (
                <li key={to}>
                  <Link to={to} aria-current={(to === '/' ? path === '/' : path.startsWith(to)) ? 'page' : undefined}>
                    {label}
                  </Link>
                </li>
              ))}
            </ul>
          </nav>
        )}
        {session && (
          <div className="who">
            <span>{session.email}</span>
            <button type="button" className="small" onClick={() => signOut.mutate()}>
              Sign out
            </button>
          </div>
        )}
      </header>
      <main id="main">
        {publicPage ??
          (session ? (
            <>
              <VerifyBanner />
              <Routes path={path} />
            </>
          ) : (
            <SignIn />
          ))}
      </main>
    </>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <App />
    </QueryClientProvider>
  </StrictMode>,
);
