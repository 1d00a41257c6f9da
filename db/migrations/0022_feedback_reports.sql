CREATE TABLE "activity_counters" (
	"user_id" text NOT NULL,
	"domain_id" text NOT NULL,
	"hour" bigint NOT NULL,
	"metric" text NOT NULL,
	"detail" text DEFAULT '' NOT NULL,
	"count" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "activity_counters_user_id_domain_id_hour_metric_detail_pk" PRIMARY KEY("user_id","domain_id","hour","metric","detail")
);
--> statement-breakpoint
CREATE TABLE "dmarc_reports" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"domain_id" text NOT NULL,
	"reporter" text NOT NULL,
	"reporter_email" text,
	"report_id" text NOT NULL,
	"begin_at" bigint NOT NULL,
	"end_at" bigint NOT NULL,
	"policy" jsonb,
	"records" integer NOT NULL,
	"messages" bigint NOT NULL,
	"truncated" boolean DEFAULT false NOT NULL,
	"received_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "dmarc_rows" (
	"report_id" text NOT NULL,
	"idx" integer NOT NULL,
	"user_id" text NOT NULL,
	"domain_id" text NOT NULL,
	"reporter" text NOT NULL,
	"day" bigint NOT NULL,
	"source_ip" text NOT NULL,
	"header_from" text NOT NULL,
	"count" bigint NOT NULL,
	"disposition" text NOT NULL,
	"dkim_aligned" boolean NOT NULL,
	"spf_aligned" boolean NOT NULL,
	"auth_results" jsonb,
	CONSTRAINT "dmarc_rows_report_id_idx_pk" PRIMARY KEY("report_id","idx")
);
--> statement-breakpoint
CREATE TABLE "tls_outcomes" (
	"policy_domain" text NOT NULL,
	"period_start" bigint NOT NULL,
	"mx_host" text NOT NULL,
	"receiving_ip" text DEFAULT '' NOT NULL,
	"sending_ip" text DEFAULT '' NOT NULL,
	"policy_type" text DEFAULT 'no-policy-found' NOT NULL,
	"result" text NOT NULL,
	"count" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "tls_outcomes_policy_domain_period_start_mx_host_receiving_ip_result_pk" PRIMARY KEY("policy_domain","period_start","mx_host","receiving_ip","result")
);
--> statement-breakpoint
CREATE TABLE "tls_report_sends" (
	"policy_domain" text NOT NULL,
	"period_start" bigint NOT NULL,
	"report_id" text NOT NULL,
	"status" text NOT NULL,
	"destinations" jsonb,
	"error" text,
	"at" bigint NOT NULL,
	CONSTRAINT "tls_report_sends_policy_domain_period_start_pk" PRIMARY KEY("policy_domain","period_start")
);
--> statement-breakpoint
CREATE TABLE "tls_reports" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"domain_id" text NOT NULL,
	"reporter" text NOT NULL,
	"reporter_contact" text,
	"report_id" text NOT NULL,
	"begin_at" bigint NOT NULL,
	"end_at" bigint NOT NULL,
	"success" bigint NOT NULL,
	"failure" bigint NOT NULL,
	"policies" jsonb NOT NULL,
	"truncated" boolean DEFAULT false NOT NULL,
	"received_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "bulk_paused_at" bigint;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "bulk_paused_reason" text;--> statement-breakpoint
CREATE UNIQUE INDEX "dmarc_reports_uq" ON "dmarc_reports" USING btree ("domain_id","reporter","report_id");--> statement-breakpoint
CREATE INDEX "dmarc_reports_domain_idx" ON "dmarc_reports" USING btree ("domain_id","begin_at");--> statement-breakpoint
CREATE INDEX "dmarc_rows_domain_day_idx" ON "dmarc_rows" USING btree ("domain_id","day");--> statement-breakpoint
CREATE UNIQUE INDEX "tls_reports_uq" ON "tls_reports" USING btree ("domain_id","reporter","report_id");--> statement-breakpoint
CREATE INDEX "tls_reports_domain_idx" ON "tls_reports" USING btree ("domain_id","begin_at");--> statement-breakpoint
-- Activity counters kept as mail flows: one upsert per statement that inserts messages or events (a
-- statement trigger over its transition table), so a group commit of 100 messages costs one upsert.
CREATE OR REPLACE FUNCTION "activity_of_messages"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "activity_counters" ("user_id", "domain_id", "hour", "metric", "detail", "count")
    SELECT "user_id", coalesce("domain_id", ''), ("created_at" / 3600000) * 3600000, 'sent', '',
      sum(
        (CASE WHEN jsonb_typeof("to_addrs") = 'array' THEN jsonb_array_length("to_addrs") ELSE 0 END) +
        (CASE WHEN jsonb_typeof("cc_addrs") = 'array' THEN jsonb_array_length("cc_addrs") ELSE 0 END) +
        (CASE WHEN jsonb_typeof("bcc_addrs") = 'array' THEN jsonb_array_length("bcc_addrs") ELSE 0 END)
      )
    FROM "new_messages"
    WHERE "direction" = 'outbound' AND "kind" = 'user' AND "user_id" IS NOT NULL
    GROUP BY 1, 2, 3
  ON CONFLICT ("user_id", "domain_id", "hour", "metric", "detail")
    DO UPDATE SET "count" = "activity_counters"."count" + EXCLUDED."count";
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER "messages_activity" AFTER INSERT ON "messages"
  REFERENCING NEW TABLE AS "new_messages" FOR EACH STATEMENT EXECUTE FUNCTION "activity_of_messages"();
--> statement-breakpoint
CREATE OR REPLACE FUNCTION "activity_of_events"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "activity_counters" ("user_id", "domain_id", "hour", "metric", "detail", "count")
    SELECT "user_id", coalesce("domain_id", ''), ("created_at" / 3600000) * 3600000,
      CASE "type"
        WHEN 'email.sent' THEN 'delivered'
        WHEN 'email.deferred' THEN 'deferred'
        WHEN 'email.bounced' THEN 'bounced'
        WHEN 'email.complained' THEN 'complained'
        WHEN 'email.opened' THEN 'opened'
        ELSE 'clicked'
      END,
      CASE WHEN "type" = 'email.bounced'
        THEN coalesce("data" -> 'bounce' ->> 'bounceClass', "data" -> 'bounce' ->> 'type', 'other')
        ELSE '' END,
      sum(CASE WHEN "type" = 'email.sent' AND jsonb_typeof("data" -> 'to') = 'array'
        THEN greatest(jsonb_array_length("data" -> 'to'), 1) ELSE 1 END)
    FROM "new_events"
    WHERE "type" IN ('email.sent', 'email.deferred', 'email.bounced', 'email.complained', 'email.opened', 'email.clicked')
    GROUP BY 1, 2, 3, 4, 5
  ON CONFLICT ("user_id", "domain_id", "hour", "metric", "detail")
    DO UPDATE SET "count" = "activity_counters"."count" + EXCLUDED."count";
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER "events_activity" AFTER INSERT ON "events"
  REFERENCING NEW TABLE AS "new_events" FOR EACH STATEMENT EXECUTE FUNCTION "activity_of_events"();
