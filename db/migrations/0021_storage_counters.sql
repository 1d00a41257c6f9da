CREATE TABLE "inbound_daily" (
	"user_id" text NOT NULL,
	"day" bigint NOT NULL,
	"messages" integer DEFAULT 0 NOT NULL,
	"bytes" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "inbound_daily_user_id_day_pk" PRIMARY KEY("user_id","day")
);
--> statement-breakpoint
CREATE TABLE "storage_usage" (
	"user_id" text PRIMARY KEY NOT NULL,
	"bytes" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
-- Mailbox bodies keep the running total up to date on every path that inserts or deletes one.
CREATE OR REPLACE FUNCTION "storage_usage_of_bodies"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO "storage_usage" ("user_id", "bytes") VALUES (NEW."user_id", NEW."size")
      ON CONFLICT ("user_id") DO UPDATE SET "bytes" = "storage_usage"."bytes" + EXCLUDED."bytes";
    RETURN NEW;
  END IF;
  UPDATE "storage_usage" SET "bytes" = "bytes" - OLD."size" WHERE "user_id" = OLD."user_id";
  RETURN OLD;
END $$;
--> statement-breakpoint
CREATE TRIGGER "mailbox_bodies_storage_usage" AFTER INSERT OR DELETE ON "mailbox_bodies"
  FOR EACH ROW EXECUTE FUNCTION "storage_usage_of_bodies"();
--> statement-breakpoint
-- What is stored now: mailbox bodies, and the raw copies kept with inbound messages (sealed ones from here on).
INSERT INTO "storage_usage" ("user_id", "bytes")
  SELECT "user_id", sum("b") FROM (
    SELECT "user_id", "size"::bigint AS "b" FROM "mailbox_bodies"
    UNION ALL
    SELECT m."user_id", octet_length(r."content")::bigint FROM "inbound_raw" r JOIN "messages" m ON m."id" = r."message_id" WHERE m."user_id" IS NOT NULL
  ) "s" GROUP BY "user_id"
ON CONFLICT ("user_id") DO UPDATE SET "bytes" = EXCLUDED."bytes";
