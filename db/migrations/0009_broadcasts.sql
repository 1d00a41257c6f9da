CREATE TABLE "broadcast_recipients" (
	"broadcast_id" text NOT NULL,
	"seq" integer NOT NULL,
	"contact_id" text NOT NULL,
	"email" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"message_id" text,
	"skip_reason" text,
	CONSTRAINT "broadcast_recipients_broadcast_id_seq_pk" PRIMARY KEY("broadcast_id","seq")
);
--> statement-breakpoint
CREATE TABLE "broadcasts" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"name" text NOT NULL,
	"from_addr" text NOT NULL,
	"reply_to" text,
	"subject" text DEFAULT '' NOT NULL,
	"preview" text,
	"audience" jsonb NOT NULL,
	"template_id" text,
	"html" text,
	"text" text,
	"footer_address" text,
	"status" text NOT NULL,
	"scheduled_at" bigint,
	"audience_count" integer,
	"sent_count" integer DEFAULT 0 NOT NULL,
	"fail_count" integer DEFAULT 0 NOT NULL,
	"skip_count" integer DEFAULT 0 NOT NULL,
	"sent_at" bigint,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "contact_imports" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"list_id" text NOT NULL,
	"status" text NOT NULL,
	"csv" text NOT NULL,
	"offset" integer DEFAULT 0 NOT NULL,
	"rows_read" integer DEFAULT 0 NOT NULL,
	"created" integer DEFAULT 0 NOT NULL,
	"updated" integer DEFAULT 0 NOT NULL,
	"rejected" integer DEFAULT 0 NOT NULL,
	"rejections" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "contacts" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"email" text NOT NULL,
	"name" text,
	"attributes" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"subscribed" boolean DEFAULT true NOT NULL,
	"unsubscribed_at" bigint,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL,
	"last_seen_at" bigint
);
--> statement-breakpoint
CREATE TABLE "list_members" (
	"list_id" text NOT NULL,
	"contact_id" text NOT NULL,
	"added_at" bigint NOT NULL,
	CONSTRAINT "list_members_list_id_contact_id_pk" PRIMARY KEY("list_id","contact_id")
);
--> statement-breakpoint
CREATE TABLE "lists" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"name" text NOT NULL,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "footer_address" text;--> statement-breakpoint
CREATE UNIQUE INDEX "broadcast_recipients_contact_uq" ON "broadcast_recipients" USING btree ("broadcast_id","contact_id");--> statement-breakpoint
CREATE INDEX "broadcast_recipients_message_idx" ON "broadcast_recipients" USING btree ("message_id") WHERE message_id is not null;--> statement-breakpoint
CREATE INDEX "broadcasts_user_idx" ON "broadcasts" USING btree ("user_id","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "contacts_user_email_uq" ON "contacts" USING btree ("user_id","email");--> statement-breakpoint
CREATE INDEX "contacts_user_created_idx" ON "contacts" USING btree ("user_id","created_at");--> statement-breakpoint
CREATE INDEX "list_members_contact_idx" ON "list_members" USING btree ("contact_id");--> statement-breakpoint
CREATE INDEX "lists_user_idx" ON "lists" USING btree ("user_id","created_at");