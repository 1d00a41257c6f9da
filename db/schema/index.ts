export * from './accounts.js';
export * from './messages.js';
export * from './domains.js';
export * from './sending.js';
export * from './inbound.js';
export * from './oauth.js';
export * from './service-domain.js';
