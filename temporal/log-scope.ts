import type { Context } from '@temporalio/activity';
import type { ActivityInboundCallsInterceptor, ActivityInterceptors } from '@temporalio/worker';
import { withLogScope } from '../core/log.js';

/** An activity interceptor: every line an activity logs carries its workflowId, runId and activity type. */
export function logScopeInterceptor(ctx: Context): ActivityInterceptors {
  const { workflowExecution, activityType } = ctx.info;
  const inbound: ActivityInboundCallsInterceptor = {
    execute: (input, next) =>
      withLogScope(
        { workflowId: workflowExecution?.workflowId, runId: workflowExecution?.runId, activity: activityType },
        () => next(input),
      ),
  };
  return { inbound };
}
