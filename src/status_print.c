/* The table `strictfs status` prints from the daemons' status document (status_print.h). */
#include "status_print.h"

#include <stdio.h>
#include <string.h>

static const char *str(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && v ? json_object_get_string(v) : "-";
}

static void print_view(json_object *v)
{
	printf("  %-32s %-52s %6s %10s\n", str(v, "mountpoint"), str(v, "effective"),
	       str(v, "open_files"), str(v, "requests"));
}

/* The quota scan, while it runs or if it failed: a large tree takes a while. */
static void print_scan(json_object *q)
{
	const char *state = str(q, "scan");

	if (!strcmp(state, "running"))
		printf("  quota scan running: %s inodes counted (%.0f%%)\n", str(q, "inodes_scanned"),
		       100.0 * json_object_get_double(json_object_object_get(q, "progress")));
	else if (!strcmp(state, "failed"))
		printf("  quota scan failed at %s: %s; usage unknown, views with limits refused\n",
		       str(q, "failed_at"), str(q, "error"));
}

void sfs_status_print(json_object *doc)
{
	json_object *daemons = json_object_object_get(doc, "daemons");
	size_t n = daemons ? json_object_array_length(daemons) : 0;

	if (!n) {
		printf("no strictfs daemon is running\n");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		json_object *d = json_object_array_get_idx(daemons, i);
		json_object *b = json_object_object_get(d, "backing");
		json_object *views = json_object_object_get(d, "views");
		json_object *opts = json_object_object_get(b, "options");
		char optline[512] = "";
		for (size_t k = 0; opts && k < json_object_array_length(opts); k++) {
			if (k)
				strncat(optline, ",", sizeof(optline) - strlen(optline) - 1);
			strncat(optline, json_object_get_string(json_object_array_get_idx(opts, k)),
			        sizeof(optline) - strlen(optline) - 1);
		}
		if (i)
			printf("\n");
		printf("source %s  (pid %s, generation %s, started %s", str(d, "source"), str(d, "pid"),
		       str(d, "generation"), str(d, "started"));
		if (json_object_object_get(d, "took_over"))
			printf(", took over %s", str(d, "took_over"));
		printf(")\n");
		if (json_object_object_get(d, "failed"))
			printf("  FAILED: %s; its views answer EIO until unmounted\n", str(d, "failed"));
		printf("  backing %s [%s]  ext4  %s  options %s\n", str(b, "path"), str(b, "device"),
		       str(b, "mode"), optline);
		print_scan(json_object_object_get(d, "quota"));
		printf("  %-32s %-52s %6s %10s\n", "VIEW", "OPTIONS", "OPEN", "REQUESTS");
		for (size_t k = 0; views && k < json_object_array_length(views); k++)
			print_view(json_object_array_get_idx(views, k));
	}
}
