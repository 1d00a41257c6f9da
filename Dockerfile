# One image for every role: `npm run start:api`, `start:smtp`, `start:imap`, `start:worker`.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production SKIP_TEMPORAL_BUILD=1
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY . .
# The workflow bundle (built once here, not at every worker start) and the dashboard (dist/app, served at /app).
RUN npm run build:workflows && npm run build:app
EXPOSE 3000 2525 1587 1465 1143 1993
CMD ["npm", "start"]
