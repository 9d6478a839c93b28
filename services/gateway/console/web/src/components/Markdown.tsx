// A model's answer as Markdown: GFM (tables, task lists, strikethrough, autolinks), code blocks
// highlighted, links opened in a new tab. Raw HTML in the text is never rendered: react-markdown
// leaves it out, and rehype-sanitize (GitHub's schema) cleans what the Markdown itself makes
// before the highlighter adds its class names.

import { memo } from 'react';
import ReactMarkdown from 'react-markdown';
import remarkGfm from 'remark-gfm';
import rehypeSanitize from 'rehype-sanitize';
import rehypeHighlight from 'rehype-highlight';

const remarkPlugins = [remarkGfm];
const rehypePlugins = [rehypeSanitize, [rehypeHighlight, { detect: true, ignoreMissing: true }]] as any;

export const Markdown = memo(function Markdown({ text, className, testid }: { text: string; className?: string; testid?: string }) {
  return (
    <div className={`markdown ${className || ''}`} data-testid={testid}>
      <ReactMarkdown
        remarkPlugins={remarkPlugins}
        rehypePlugins={rehypePlugins}
        components={{ a: ({ node: _node, ...props }) => <a {...props} target="_blank" rel="noopener noreferrer" /> }}
      >{text}</ReactMarkdown>
    </div>
  );
});
