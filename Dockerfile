# One image for every role: `npm run start:api`, `start:smtp`, `start:worker`.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production SKIP_TEMPORAL_BUILD=1
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY . .
# The workflow bundle is built once here, not at every worker start.
RUN npm run build:workflows
EXPOSE 3000 2525
CMD ["npm", "start"]
