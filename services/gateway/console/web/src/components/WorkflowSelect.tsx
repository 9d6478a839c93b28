// The caller's saved workflows, for the pages that start one by itself (schedules, hooks): the
// picker's options and each id's name for the lists.

import { useEffect, useState } from 'react';
import { api } from '../lib/api';

export interface WorkflowList { options: [string, string][]; names: Record<string, string> }

export function useWorkflows(): WorkflowList | null {
  const [list, setList] = useState<WorkflowList | null>(null);
  useEffect(() => {
    let live = true;
    api('/workflows', { query: { limit: 200 } }).then((page) => {
      const items: any[] = page.items || [];
      const options: [string, string][] = [['', items.length ? 'Pick a workflow…' : 'No saved workflow: save one in the editor'], ...items.map((w) => [w.id, w.name || w.id] as [string, string])];
      if (live) setList({ options, names: Object.fromEntries(items.map((w) => [w.id, w.name || w.id])) });
    }, (err) => {
      if (live) setList({ options: [['', `Could not load workflows: ${err.message}`]], names: {} });
    });
    return () => { live = false; };
  }, []);
  return list;
}
