// The console shell: login gate, navigation and the router under /console/. Each page is a
// component in pages/; admin pages say so to a regular user instead of failing on a 403.

import { StrictMode, useEffect, useSyncExternalStore, type ReactNode } from 'react';
import { createRoot } from 'react-dom/client';
import { BrowserRouter, Link, Navigate, Route, Routes, useLocation, useNavigate } from 'react-router-dom';
import '@xyflow/react/dist/style.css';
import './console.css';
import { logout, session, setUnauthorizedHandler } from './lib/api';
import { ErrorBox, Toasts } from './components/ui';
import LoginPage from './pages/Login';
import OverviewPage from './pages/Overview';
import StatusPage from './pages/Status';
import ModelsPage from './pages/Models';
import PromptsPage from './pages/Prompts';
import McpPage from './pages/Mcp';
import { AuditPage, GuardrailPage } from './pages/Logs';
import ChatPage from './pages/Chat';
import RunsPage from './pages/Runs';
import SubmitPage from './pages/Submit';
import RunPage from './pages/Run';
import KbPage from './pages/Kb';
import KbDetailPage from './pages/KbDetail';
import KeysPage from './pages/Keys';
import SchedulesPage from './pages/Schedules';
import HooksPage from './pages/Hooks';
import EditorPage from './editor/EditorPage';

export const BASE = '/console';

const NAV = [
  { href: '/overview', label: 'Overview', admin: true },
  { href: '/status', label: 'Status', admin: true },
  { href: '/models', label: 'Models', admin: true },
  { href: '/prompts', label: 'Prompts', admin: true },
  { href: '/mcp', label: 'MCP servers', admin: true },
  { href: '/audit', label: 'Audit', admin: true },
  { href: '/guardrail', label: 'Guardrail', admin: true },
  { href: '/editor', label: 'Editor' },
  { href: '/chat', label: 'Chat' },
  { href: '/runs', label: 'Runs' },
  { href: '/kb', label: 'Knowledge' },
  { href: '/schedules', label: 'Schedules' },
  { href: '/hooks', label: 'Hooks' },
  { href: '/keys', label: 'Keys' },
];

// Session changes (login, logout, an expired token) re-render the shell.
const sessionListeners = new Set<() => void>();
export function sessionChanged() { for (const l of sessionListeners) l(); }
function useSession() {
  return useSyncExternalStore((cb) => { sessionListeners.add(cb); return () => { sessionListeners.delete(cb); }; }, () => session.token);
}

function Shell({ children }: { children: ReactNode }) {
  const { pathname } = useLocation();
  const navigate = useNavigate();
  const user = session.user;
  return (
    <>
      <header className="topbar">
        <a className="skip" href="#main">Skip to content</a>
        <Link className="brand" to="/">Agentix</Link>
        <nav className="nav" aria-label="Main">
          {NAV.filter((n) => !n.admin || user?.admin).map((n) => (
            <Link key={n.href} to={n.href} aria-current={pathname.startsWith(n.href) ? 'page' : undefined}>{n.label}</Link>
          ))}
        </nav>
        <div className="who">
          <span data-testid="whoami">{user ? user.name : ''}{user?.admin ? <> <span className="badge">admin</span></> : null}</span>
          <button type="button" className="link" onClick={() => { logout(); sessionChanged(); navigate('/login'); }}>Log out</button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>{children}</main>
    </>
  );
}

function Gate({ children, admin = false, title }: { children: ReactNode; admin?: boolean; title: string }) {
  const token = useSession();
  const { pathname, search } = useLocation();
  if (!token) {
    const next = pathname === '/' ? '' : `?next=${encodeURIComponent(pathname + search)}`;
    return <Navigate to={`/login${next}`} replace />;
  }
  if (admin && !session.user?.admin) {
    return <Shell><h1>{title}</h1><ErrorBox error={new Error('This page is for administrators.')} /></Shell>;
  }
  return <Shell>{children}</Shell>;
}

function Home() {
  const token = useSession();
  if (!token) return <Navigate to="/login" replace />;
  return <Navigate to={session.user?.admin ? '/overview' : '/runs'} replace />;
}

function UnauthorizedRedirect() {
  const navigate = useNavigate();
  const location = useLocation();
  useEffect(() => {
    setUnauthorizedHandler(() => {
      session.clear();
      sessionChanged();
      navigate(`/login?expired=1&next=${encodeURIComponent(location.pathname)}`, { replace: true });
    });
  }, [navigate, location.pathname]);
  return null;
}

function NotFound() {
  return <><h1>Not found</h1><p>No page here. <Link to="/">Go home</Link></p></>;
}

function App() {
  const page = (el: ReactNode, title: string, admin = false) => <Gate title={title} admin={admin}>{el}</Gate>;
  return (
    <BrowserRouter basename={BASE}>
      <UnauthorizedRedirect />
      <Routes>
        <Route path="/" element={<Home />} />
        <Route path="/login" element={<LoginPage onLogin={sessionChanged} />} />
        <Route path="/overview" element={page(<OverviewPage />, 'Overview', true)} />
        <Route path="/status" element={page(<StatusPage />, 'Status', true)} />
        <Route path="/models" element={page(<ModelsPage />, 'Models', true)} />
        <Route path="/prompts" element={page(<PromptsPage />, 'Prompts', true)} />
        <Route path="/mcp" element={page(<McpPage />, 'MCP servers', true)} />
        <Route path="/audit" element={page(<AuditPage />, 'Audit log', true)} />
        <Route path="/guardrail" element={page(<GuardrailPage />, 'Guardrail events', true)} />
        <Route path="/editor" element={page(<EditorPage />, 'Editor')} />
        <Route path="/editor/:id" element={page(<EditorPage />, 'Editor')} />
        <Route path="/chat" element={page(<ChatPage />, 'Chat')} />
        <Route path="/chat/:id" element={page(<ChatPage />, 'Chat')} />
        <Route path="/runs" element={page(<RunsPage />, 'Runs')} />
        <Route path="/runs/new" element={page(<SubmitPage />, 'New run')} />
        <Route path="/runs/:id" element={page(<RunPage />, 'Run')} />
        <Route path="/kb" element={page(<KbPage />, 'Knowledge bases')} />
        <Route path="/kb/:name" element={page(<KbDetailPage />, 'Knowledge base')} />
        <Route path="/schedules" element={page(<SchedulesPage />, 'Schedules')} />
        <Route path="/schedules/:id" element={page(<SchedulesPage />, 'Schedules')} />
        <Route path="/hooks" element={page(<HooksPage />, 'Hooks')} />
        <Route path="/keys" element={page(<KeysPage />, 'API keys')} />
        <Route path="*" element={page(<NotFound />, 'Not found')} />
      </Routes>
      <Toasts />
    </BrowserRouter>
  );
}

createRoot(document.getElementById('app')!).render(<StrictMode><App /></StrictMode>);
