CREATE TABLE "app_passwords" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"domain_id" text,
	"label" text NOT NULL,
	"address" text NOT NULL,
	"protocols" jsonb NOT NULL,
	"key_prefix" text NOT NULL,
	"secret_hash" text NOT NULL,
	"legacy" boolean DEFAULT false NOT NULL,
	"created_at" bigint NOT NULL,
	"last_used_at" bigint
);
--> statement-breakpoint
CREATE TABLE "mailbox_messages" (
	"uid" serial PRIMARY KEY NOT NULL,
	"mailbox_id" text NOT NULL,
	"message_id" text,
	"flags" jsonb NOT NULL,
	"from_addr" text NOT NULL,
	"to_addr" text NOT NULL,
	"subject" text,
	"size" integer NOT NULL,
	"raw" "bytea" NOT NULL,
	"internal_date" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "mailboxes" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"domain_id" text NOT NULL,
	"address" text NOT NULL,
	"name" text NOT NULL,
	"uid_validity" integer NOT NULL,
	"uid_next" integer DEFAULT 1 NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "routes" ADD COLUMN "action" text DEFAULT 'webhook' NOT NULL;--> statement-breakpoint
ALTER TABLE "routes" ADD COLUMN "destination" text;--> statement-breakpoint
CREATE UNIQUE INDEX "app_passwords_secret_uq" ON "app_passwords" USING btree ("secret_hash");--> statement-breakpoint
CREATE INDEX "app_passwords_user_idx" ON "app_passwords" USING btree ("user_id");--> statement-breakpoint
CREATE INDEX "mailbox_messages_mailbox_idx" ON "mailbox_messages" USING btree ("mailbox_id","uid");--> statement-breakpoint
CREATE UNIQUE INDEX "mailboxes_domain_address_name_uq" ON "mailboxes" USING btree ("domain_id","address","name");--> statement-breakpoint
CREATE INDEX "mailboxes_domain_idx" ON "mailboxes" USING btree ("domain_id");