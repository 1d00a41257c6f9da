# One image for every role: `npm run start:api`, `start:smtp`, `start:imap`, `start:worker`.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production SKIP_TEMPORAL_BUILD=1
COPY package.json package-lock.json ./
COPY scripts ./scripts
RUN npm ci --no-audit --no-fund
COPY . .
EXPOSE 3000 2525 1143 1993
CMD ["npm", "start"]
