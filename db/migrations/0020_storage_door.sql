CREATE TABLE "mailbox_bodies" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"size" integer NOT NULL,
	"raw" "bytea" NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "mailbox_messages" ADD COLUMN "body_id" text;--> statement-breakpoint
DELETE FROM "mailbox_messages" WHERE "mailbox_id" NOT IN (SELECT "id" FROM "mailboxes");--> statement-breakpoint
INSERT INTO "mailbox_bodies" ("id", "user_id", "size", "raw", "created_at")
	SELECT 'mbb_uid' || m."uid", b."user_id", m."size", m."raw", m."internal_date" FROM "mailbox_messages" m JOIN "mailboxes" b ON b."id" = m."mailbox_id";--> statement-breakpoint
UPDATE "mailbox_messages" SET "body_id" = 'mbb_uid' || "uid";--> statement-breakpoint
ALTER TABLE "mailbox_messages" ALTER COLUMN "body_id" SET NOT NULL;--> statement-breakpoint
CREATE INDEX "mailbox_bodies_user_idx" ON "mailbox_bodies" USING btree ("user_id","size");--> statement-breakpoint
CREATE INDEX "stored_files_user_idx" ON "stored_files" USING btree ("user_id","expires_at");--> statement-breakpoint
CREATE INDEX "mailbox_messages_body_idx" ON "mailbox_messages" USING btree ("body_id");--> statement-breakpoint
ALTER TABLE "mailbox_messages" DROP COLUMN "raw";
