export * from './accounts.js';
export * from './messages.js';
