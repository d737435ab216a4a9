// The task fields a breakpoint condition, log message or watch can name in
// a debugged task (the worker wrapper defines `sparkdap` there), and when
// to offer them.
//
// How VS Code's breakpoint widget completes (src/vs/workbench/contrib/
// debug/browser/breakpointWidget.ts, the same from 1.6x through 1.9x and
// later): its input is a throwaway model of scheme "debug", which is not
// synced to extensions, so a provider registered for that scheme is never
// asked. Instead the widget registers its own provider that calls every
// completion provider of the *edited file's* model at (breakpoint line,
// column 1), drops Snippet items, and stretches each item's range over the
// text typed before the cursor. So an extension's provider for Python
// files is consulted, at column 1 of the breakpoint's line: that is the
// position to answer at, and the items must not be snippets.

export interface ConditionField {
  name: string;
  type: string;
  doc: string;
}

export const CONDITION_FIELDS: readonly ConditionField[] = [
  { name: 'sparkdap.partition', type: 'int', doc: "the task's partition id (TaskContext.partitionId())" },
  { name: 'sparkdap.stage', type: 'int', doc: "the task's stage id (TaskContext.stageId())" },
  { name: 'sparkdap.attempt', type: 'int', doc: "the task's attempt number, 0 first (TaskContext.attemptNumber())" },
  { name: 'sparkdap.executor', type: 'str', doc: 'the Spark executor id ("driver" in local mode)' },
  {
    name: 'sparkdap.task_attempt_id',
    type: 'int',
    doc: "the task attempt id, unique in the application (TaskContext.taskAttemptId()); `sparkdap select --task` takes it",
  },
];

/**
 * Whether a completion request at this place may come from the breakpoint
 * widget: it always asks at the first column of a line with code on it (a
 * breakpoint's line). In the editor itself that is a request at the very
 * start of a non-empty line, made with Ctrl+Space before typing anything
 * (typing a letter moves the cursor off column 1), so Python completion is
 * left alone everywhere else.
 */
export function shouldOffer(character: number, lineText: string): boolean {
  return character === 0 && lineText.trim() !== '';
}
