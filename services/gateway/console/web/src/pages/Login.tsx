import { useState } from 'react';
import { useNavigate, useSearchParams } from 'react-router-dom';
import { login } from '../lib/api';
import { ErrorBox, useTitle } from '../components/ui';

export default function LoginPage({ onLogin }: { onLogin: () => void }) {
  useTitle('Log in');
  const [query] = useSearchParams();
  const navigate = useNavigate();
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (ev: React.FormEvent) => {
    ev.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await login(user.trim(), password);
      onLogin();
      const next = query.get('next');
      navigate(next && next.startsWith('/') && next !== '/login' ? next : '/', { replace: true });
    } catch (err) {
      setError(err);
      (document.getElementById('login-pass') as HTMLInputElement | null)?.select();
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" tabIndex={-1}>
      <div className="login-wrap">
        <form className="login" aria-labelledby="login-title" onSubmit={submit}>
          <h1 id="login-title">Agentix console</h1>
          <div className="field"><label htmlFor="login-user">Username</label>
            <input id="login-user" name="username" autoComplete="username" required autoFocus value={user} onChange={(e) => setUser(e.target.value)} /></div>
          <div className="field"><label htmlFor="login-pass">Password</label>
            <input id="login-pass" name="password" type="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} /></div>
          <div aria-live="polite">
            {query.get('expired') ? <div className="notice warn">Your session ended. Please log in again.</div> : null}
            <ErrorBox error={error} />
          </div>
          <button type="submit" className="primary" disabled={busy}>Log in</button>
        </form>
      </div>
    </main>
  );
}
