import type { RequestHandler } from 'express';

const DENY = "frame-ancestors 'none'";

/**
 * No page of the service may be framed by another site (clickjacking: an unsubscribe or consent button
 * under a decoy). Every answer gets `X-Frame-Options: DENY`, and a Content-Security-Policy that says
 * `frame-ancestors 'none'`: a route's own policy keeps its directives and gets this one added when it
 * lacks it, so a new HTML page cannot forget it.
 */
export const denyFraming: RequestHandler = (_req, res, next) => {
  const writeHead = res.writeHead;
  res.writeHead = function (this: typeof res, ...args: Parameters<typeof writeHead>) {
    if (!this.headersSent) {
      const csp = this.getHeader('content-security-policy');
      const policy = Array.isArray(csp) ? csp.join(', ') : csp === undefined ? '' : String(csp);
      if (!/frame-ancestors/i.test(policy))
        this.setHeader('Content-Security-Policy', policy ? `${policy}; ${DENY}` : DENY);
      if (!this.hasHeader('x-frame-options')) this.setHeader('X-Frame-Options', 'DENY');
    }
    return writeHead.apply(this, args);
  } as typeof writeHead;
  next();
};
