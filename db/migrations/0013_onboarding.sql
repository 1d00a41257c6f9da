ALTER TABLE "users" ADD COLUMN "created_via" text;--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "created_ip" text;--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "created_client_id" text;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "enrols" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "mx_token" text;--> statement-breakpoint
UPDATE "domains" SET "mx_token" = substr(md5(random()::text || "id"), 1, 20) WHERE "mx_token" IS NULL;--> statement-breakpoint
ALTER TABLE "domains" ALTER COLUMN "mx_token" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "sequence_outbox" ADD COLUMN "message_id" text;--> statement-breakpoint
ALTER TABLE "sequence_outbox" ADD COLUMN "email" text;--> statement-breakpoint
ALTER TABLE "sequence_outbox" ADD COLUMN "held" boolean DEFAULT false NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "domains_mx_token_uq" ON "domains" USING btree ("mx_token");--> statement-breakpoint
CREATE INDEX "sequence_outbox_message_idx" ON "sequence_outbox" USING btree ("message_id") WHERE held;