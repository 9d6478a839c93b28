// The chat's answers as Markdown (GFM tables, highlighted code, links), never raw HTML from a
// model; Enter sends and Shift+Enter makes a new line.

import { afterEach, expect, test, vi } from 'vitest';
import { cleanup, fireEvent, render } from '@testing-library/react';
import { useState } from 'react';
import { MessageBox, MessageView } from '../components/ChatParts';

afterEach(cleanup);

const answer = (content: string) => ({ id: 'm1', role: 'assistant', message_type: 'text', content, run_id: 'r1' });

test('a stored answer renders GFM tables, highlighted code and links', () => {
  const md = 'Here:\n\n| tier | where |\n|---|---|\n| 1 | gateway |\n\n```python\ndef f(x):\n    return x + 1\n```\n\nSee [the docs](https://example.org/docs).';
  const { container } = render(<MessageView m={answer(md)} />);
  const cells = [...container.querySelectorAll('table td')].map((td) => td.textContent);
  expect(cells).toEqual(['1', 'gateway']);
  const code = container.querySelector('pre code')!;
  expect(code.className).toMatch(/hljs/);
  expect(code.querySelector('.hljs-keyword')?.textContent).toBe('def');
  const link = container.querySelector('a')!;
  expect(link.getAttribute('href')).toBe('https://example.org/docs');
  expect(link.getAttribute('rel')).toBe('noopener noreferrer');
});

test('raw HTML from a model is never rendered as markup', () => {
  const md = 'Hi <img src="x" onerror="alert(1)"> <script>alert(2)</script> <b>bold?</b> [x](javascript:alert(3))';
  const { container } = render(<MessageView m={answer(md)} />);
  expect(container.querySelector('img')).toBeNull();
  expect(container.querySelector('script')).toBeNull();
  expect(container.querySelector('b')).toBeNull();
  expect(container.querySelector('[onerror]')).toBeNull();
  for (const a of container.querySelectorAll('a')) expect(a.getAttribute('href') || '').not.toMatch(/^javascript:/i);
});

test('an interrupted answer keeps the exact text it stopped at', () => {
  const { container } = render(<MessageView m={{ ...answer('The first half of an answer that never '), message_type: 'interrupted' }} />);
  expect(container.querySelector('[data-testid="message-text"]')!.textContent).toBe('The first half of an answer that never ');
});

test('Enter sends, Shift+Enter makes a new line', () => {
  const sent = vi.fn();
  function Box() {
    const [v, setV] = useState('hello');
    return <MessageBox value={v} onChange={setV} onSend={sent} />;
  }
  const { getByLabelText } = render(<Box />);
  const box = getByLabelText('Message') as HTMLTextAreaElement;
  expect(fireEvent.keyDown(box, { key: 'Enter', shiftKey: true })).toBe(true); // not prevented: the browser adds the line
  expect(sent).not.toHaveBeenCalled();
  expect(fireEvent.keyDown(box, { key: 'Enter' })).toBe(false); // prevented: no new line
  expect(sent).toHaveBeenCalledTimes(1);
});
