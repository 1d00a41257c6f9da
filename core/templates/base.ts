/** A built-in template (`base_…`): a starting point every account can send with or copy; never stored. */
export type BaseTemplate = {
  readonly id: `base_${string}`;
  readonly name: string;
  readonly subject: string;
  readonly html: string;
  readonly text: string;
};

/** One centered card with inline styles: mail clients drop <style> blocks and external CSS. */
const layout = (body: string) => `<!doctype html>
<html><body style="margin:0;padding:0;background:#f4f4f5;font-family:Arial,Helvetica,sans-serif;color:#18181b">
<table role="presentation" width="100%" cellpadding="0" cellspacing="0" style="background:#f4f4f5;padding:24px 0"><tr><td align="center">
<table role="presentation" width="560" cellpadding="0" cellspacing="0" style="max-width:560px;background:#ffffff;border-radius:8px;padding:32px">
<tr><td style="font-size:16px;line-height:24px">
${body}
</td></tr></table>
</td></tr></table>
</body></html>`;

const button = (href: string, label: string) =>
  `<p style="margin:24px 0"><a href="${href}" style="display:inline-block;background:#2563eb;color:#ffffff;text-decoration:none;padding:12px 20px;border-radius:6px;font-weight:bold">${label}</a></p>`;

const muted = (text: string) => `<p style="margin:24px 0 0;font-size:13px;line-height:20px;color:#71717a">${text}</p>`;

/** The built-in templates, in the order they are listed. */
export const BASE_TEMPLATES: readonly BaseTemplate[] = Object.freeze([
  {
    id: 'base_welcome',
    name: 'Welcome',
    subject: 'Welcome to {{product}}, {{name}}',
    html: layout(
      [
        '<h1 style="margin:0 0 16px;font-size:22px">Welcome, {{name}}!</h1>',
        '<p style="margin:0 0 16px">Thanks for joining {{product}}. Your account is ready.</p>',
        button('{{action_url}}', 'Get started'),
        muted('You are receiving this email because you signed up for {{product}}.'),
      ].join('\n'),
    ),
    text: 'Welcome, {{name}}!\n\nThanks for joining {{product}}. Your account is ready.\n\nGet started: {{action_url}}\n',
  },
  {
    id: 'base_receipt',
    name: 'Receipt',
    subject: 'Your {{product}} receipt {{receipt_number}}',
    html: layout(
      [
        '<h1 style="margin:0 0 16px;font-size:22px">Thanks for your payment</h1>',
        '<p style="margin:0 0 16px">Hi {{name}}, we received your payment.</p>',
        '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" style="border-top:1px solid #e4e4e7;border-bottom:1px solid #e4e4e7">',
        '<tr><td style="padding:8px 0">Receipt</td><td align="right" style="padding:8px 0">{{receipt_number}}</td></tr>',
        '<tr><td style="padding:8px 0">Date</td><td align="right" style="padding:8px 0">{{date}}</td></tr>',
        '<tr><td style="padding:8px 0">{{description}}</td><td align="right" style="padding:8px 0;font-weight:bold">{{amount}}</td></tr>',
        '</table>',
        muted('Questions about this charge? Reply to this email.'),
      ].join('\n'),
    ),
    text: 'Hi {{name}}, we received your payment.\n\nReceipt: {{receipt_number}}\nDate: {{date}}\n{{description}}: {{amount}}\n\nQuestions about this charge? Reply to this email.\n',
  },
  {
    id: 'base_password_reset',
    name: 'Password reset',
    subject: 'Reset your {{product}} password',
    html: layout(
      [
        '<h1 style="margin:0 0 16px;font-size:22px">Reset your password</h1>',
        '<p style="margin:0 0 16px">Hi {{name}}, someone asked to reset the password of your {{product}} account.</p>',
        button('{{reset_url}}', 'Choose a new password'),
        muted(
          'This link expires in {{expires_in}}. If you did not ask for it, ignore this email; your password stays the same.',
        ),
      ].join('\n'),
    ),
    text: 'Hi {{name}}, someone asked to reset the password of your {{product}} account.\n\nChoose a new password: {{reset_url}}\n\nThis link expires in {{expires_in}}. If you did not ask for it, ignore this email.\n',
  },
  {
    id: 'base_plain',
    name: 'Plain message',
    subject: '{{subject}}',
    html: layout('<p style="margin:0;white-space:pre-line">{{body}}</p>'),
    text: '{{body}}\n',
  },
]);

const byId = new Map<string, BaseTemplate>(BASE_TEMPLATES.map((t) => [t.id, t]));

/** The built-in template with this id, or undefined (also for every non-`base_` id). */
export function findBaseTemplate(id: string): BaseTemplate | undefined {
  return byId.get(id);
}
