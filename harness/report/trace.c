/* trace.c - `sgdlab trace RUN`: a run's step records as a Chrome /
 * Perfetto trace (the JSON trace-event format).
 *
 * The run is one process (pid = run id) named after its variant; each rank
 * is one thread track (tid = rank) named "rank R ROLE", ranks in order.
 * Every step row gives up to three complete events ("ph":"X"): compute,
 * comm and wait, each with its recorded duration, laid end to end from the
 * row's t_start (seconds since the run's start, in microseconds here).  A
 * row records how long each phase took, not where in the step it fell, so
 * the order compute -> comm -> wait within a step is nominal; phases of
 * zero or unknown duration get no event.  The run's settings go into
 * metadata events and "otherData".
 *
 * The allreduce engine's sampled steps (setting bucket_every; table
 * buckets) add a second track per rank, "rank R buckets" (tid = rank +
 * SG_TRACE_BUCKET_TID): one complete event "bucket" per gradient bucket,
 * from its allreduce's start to its end, and an instant event "ready" when
 * backward handed it over -- measured times, on the step's clock, so a
 * bucket reduced while backward still runs lies under the step's compute
 * slice.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_path.h"
#include "err.h"
#include "outfile.h"
#include "escape.h"
#include "report.h"

static const char usage[] =
    "usage: sgdlab trace RUN [--db PATH] [--out FILE] [--html FILE]\n"
    "\n"
    "Write run RUN's step records as a trace (Chrome trace-event JSON): one\n"
    "track per rank, a compute, comm and wait slice per step.  Open it in\n"
    "https://ui.perfetto.dev or chrome://tracing, or write it as a page that\n"
    "draws it (--html) and opens in any browser, offline.\n"
    "\n"
    "  --db PATH    results database (default " SG_DEFAULT_DB ")\n"
    "  --out FILE   write the trace JSON to FILE (default: standard output)\n"
    "  --html FILE  write a self-contained HTML timeline of it to FILE (no JSON\n"
    "               on standard output unless --out is given too)\n";

/* "key": as JSON, and a number or null. */
static void jkey(FILE *f, const char *k) {
  sg_json_str(f, k);
  fputc(':', f);
}

static void jnum(FILE *f, double v) {
  char b[40];
  if (isnan(v) || isinf(v)) fputs("null", f);
  else fputs(sg_fmt_real(b, sizeof b, v), f);
}

/* A metadata event: {"ph":"M","pid":P[,"tid":T],"name":NAME,"args":{KEY:VAL}}. */
static void meta(FILE *f, int64_t pid, long tid, const char *name, const char *key,
                 const char *sval, long ival) {
  fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%lld,", (long long)pid);
  if (tid >= 0) fprintf(f, "\"tid\":%ld,", tid);
  fprintf(f, "\"name\":\"%s\",\"args\":{\"%s\":", name, key);
  if (sval) sg_json_str(f, sval);
  else fprintf(f, "%ld", ival);
  fputs("}}", f);
}

static int run_meta(FILE *f, sqlite3 *db, const sg_rset_t *s, const sg_rrun_t *r) {
  char title[768], lab[512];
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{", f);
  fprintf(f, "\"run_id\":%lld,\"experiment_id\":%lld,", (long long)r->id,
          (long long)r->experiment_id);
  jkey(f, "experiment");
  sg_json_str(f, s->name);
  fputs(",\"variant\":", f);
  sg_json_str(f, sg_rrun_label(s, r, lab, sizeof lab));
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT engine, transport, launcher, workers, servers, status,"
                        " error, started_at, wall_s, options_json FROM runs WHERE id = ?1",
                        &st));
  sqlite3_bind_int64(st, 1, r->id);
  if (sqlite3_step(st) == SQLITE_ROW)
    for (int c = 0; c < sqlite3_column_count(st); c++) {
      fputc(',', f);
      jkey(f, sqlite3_column_name(st, c));
      int t = sqlite3_column_type(st, c);
      if (t == SQLITE_NULL) fputs("null", f);
      else if (t == SQLITE_INTEGER || t == SQLITE_FLOAT) jnum(f, sqlite3_column_double(st, c));
      else sg_json_str(f, sg_rdb_text(st, c));
    }
  fputs("},\n\"traceEvents\":[\n", f);
  snprintf(title, sizeof title, "run %lld: %s (experiment %s)", (long long)r->id, lab,
           s->name);
  fprintf(f, "{\"ph\":\"M\",\"pid\":%lld,\"name\":\"process_name\",\"args\":{\"name\":",
          (long long)r->id);
  sg_json_str(f, title);
  fputs("}}", f);
  snprintf(title, sizeof title, "engine %s, workers %d, servers %d, transport %s, %s",
           r->engine, r->workers, r->servers, r->transport, r->status);
  meta(f, r->id, -1, "process_labels", "labels", title, 0);
fail:
  sqlite3_finalize(st);
  return rc;
}

/* One track per rank: the ranks table and every rank with step rows. */
static int rank_tracks(FILE *f, sqlite3 *db, int64_t run_id) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  char name[160];
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT rank, max(role) FROM (SELECT rank, role FROM ranks"
                        " WHERE run_id = ?1 UNION ALL SELECT DISTINCT rank, role"
                        " FROM steps WHERE run_id = ?1) WHERE rank IS NOT NULL"
                        " GROUP BY rank ORDER BY rank",
                        &st));
  sqlite3_bind_int64(st, 1, run_id);
  while (sqlite3_step(st) == SQLITE_ROW) {
    long rank = (long)sqlite3_column_int64(st, 0);
    const char *role = sg_rdb_text(st, 1);
    snprintf(name, sizeof name, "rank %ld %s", rank, *role ? role : "(no role)");
    meta(f, run_id, rank, "thread_name", "name", name, 0);
    meta(f, run_id, rank, "thread_sort_index", "sort_index", NULL, rank);
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

/* Complete events of every step row; *n gets their count. */
static int step_events(FILE *f, sqlite3 *db, int64_t run_id, long long *n) {
  static const char *const phase[3] = {"compute", "comm", "wait"};
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT rank, step, epoch, t_start, compute_s, comm_s, wait_s,"
                        " bytes_sent, bytes_recv, loss, staleness FROM steps"
                        " WHERE run_id = ?1 AND t_start IS NOT NULL"
                        " ORDER BY rank, step, t_start",
                        &st));
  sqlite3_bind_int64(st, 1, run_id);
  while (sqlite3_step(st) == SQLITE_ROW) {
    double t = sqlite3_column_double(st, 3) * 1e6;
    for (int k = 0; k < 3; k++) {
      double d = sg_rdb_double(st, 4 + k) * 1e6;
      if (!(d > 0) || isinf(d)) continue; /* NULL, zero, negative: no slice */
      if (!isfinite(t)) break;            /* "ts":inf is not JSON: no place on the timeline */
      fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"step\",\"name\":\"%s\",\"pid\":%lld,"
                 "\"tid\":%lld,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%lld",
              phase[k], (long long)run_id, (long long)sqlite3_column_int64(st, 0), t, d,
              (long long)sqlite3_column_int64(st, 1));
      if (k == 0) {
        fprintf(f, ",\"epoch\":%lld,\"loss\":", (long long)sqlite3_column_int64(st, 2));
        jnum(f, sg_rdb_double(st, 9));
        fputs(",\"staleness\":", f);
        jnum(f, sg_rdb_double(st, 10));
      } else if (k == 1) {
        fprintf(f, ",\"bytes_sent\":%lld,\"bytes_recv\":%lld",
                (long long)sqlite3_column_int64(st, 7), (long long)sqlite3_column_int64(st, 8));
      }
      fputs("}}", f);
      (*n)++;
      t += d;
    }
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

enum { SG_TRACE_BUCKET_TID = 1 << 20 };

/* 1 when the database has a buckets table (schema version 6 on). */
static int have_buckets(sqlite3 *db) {
  sqlite3_stmt *st = NULL;
  int yes = sg_rdb_prepare(db, "SELECT 1 FROM sqlite_master WHERE type = 'table'"
                               " AND name = 'buckets'", &st) == SG_OK &&
            sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  sg_err_clear();
  return yes;
}

/* One bucket row: its allreduce as a complete event, its hand-over as an
 * instant event, on the rank's bucket track; t = the step's start (us).
 * Each is left out when a time it prints is not finite: "ts":inf is not
 * JSON, and finite times in a forged row (a start of -1e302 s and an end
 * of 1e302 s) can still sum to one. */
static void bucket_event(FILE *f, sqlite3_stmt *st, int64_t run_id, double t) {
  long long rank = sqlite3_column_int64(st, 0), tid = rank + SG_TRACE_BUCKET_TID;
  double ready = sg_rdb_double(st, 6) * 1e6, a = sg_rdb_double(st, 7) * 1e6,
         b = sg_rdb_double(st, 8) * 1e6;
  char args[200];
  snprintf(args, sizeof args, "\"step\":%lld,\"bucket\":%lld,\"of\":%lld,\"offset\":%lld,"
           "\"floats\":%lld", (long long)sqlite3_column_int64(st, 1),
           (long long)sqlite3_column_int64(st, 2), (long long)sqlite3_column_int64(st, 3),
           (long long)sqlite3_column_int64(st, 4), (long long)sqlite3_column_int64(st, 5));
  if (isfinite(t + a) && isfinite(b - a) && b >= a)
    fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"bucket\",\"name\":\"bucket\",\"pid\":%lld,"
               "\"tid\":%lld,\"ts\":%.3f,\"dur\":%.3f,\"args\":{%s}}",
            (long long)run_id, tid, t + a, b - a, args);
  if (isfinite(t + ready))
    fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"bucket\",\"name\":\"ready\","
               "\"pid\":%lld,\"tid\":%lld,\"ts\":%.3f,\"args\":{%s}}",
            (long long)run_id, tid, t + ready, args);
}

/* The bucket tracks and events of the run's sampled steps, if any. */
static int bucket_events(FILE *f, sqlite3 *db, int64_t run_id, long long *n) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  long long last = -1;
  char name[64];
  if (!have_buckets(db)) return SG_OK;
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT b.rank, b.step, b.bucket, b.nbuckets, b.offset, b.floats,"
                        " b.ready_s, b.start_s, b.end_s, s.t_start FROM buckets b"
                        " JOIN steps s ON s.run_id = b.run_id AND s.rank = b.rank"
                        " AND s.step = b.step WHERE b.run_id = ?1 AND s.t_start IS NOT NULL"
                        " ORDER BY b.rank, b.step, b.bucket",
                        &st));
  sqlite3_bind_int64(st, 1, run_id);
  while (sqlite3_step(st) == SQLITE_ROW) {
    long long rank = sqlite3_column_int64(st, 0);
    double t = sqlite3_column_double(st, 9) * 1e6;
    if (!isfinite(t)) continue;
    if (rank != last) {
      snprintf(name, sizeof name, "rank %lld buckets", rank);
      meta(f, run_id, (long)(rank + SG_TRACE_BUCKET_TID), "thread_name", "name", name, 0);
      meta(f, run_id, (long)(rank + SG_TRACE_BUCKET_TID), "thread_sort_index", "sort_index",
           NULL, (long)rank);
      last = rank;
    }
    bucket_event(f, st, run_id, t);
    (*n)++;
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

static int write_trace(FILE *f, sqlite3 *db, int64_t run_id, long long *n) {
  sg_rset_t *s = NULL;
  const sg_rrun_t *r = NULL;
  int rc = SG_OK;
  SG_TRY(sg_rset_load_run(db, run_id, &s, &r));
  SG_TRY(run_meta(f, db, s, r));
  SG_TRY(rank_tracks(f, db, run_id));
  SG_TRY(step_events(f, db, run_id, n));
  SG_TRY(bucket_events(f, db, run_id, n));
  fputs("\n]}\n", f);
fail:
  sg_rset_destroy(&s);
  return rc;
}


/* ---- the timeline as a page ----------------------------------------------- */

/* The page draws the trace JSON above it (embedded as data, never run: the
 * JSON writer escapes '<', so no string can close the element) with the
 * nonce'd script below; the policy allows no other script or load. */
static const char html_style[] =
    "body{font:14px system-ui,sans-serif;margin:24px;color:#222}"
    "h1{font-size:20px;margin:0 0 4px}p{margin:4px 0 12px;color:#555}"
    "svg{border:1px solid #ddd;background:#fff}"
    "rect.compute{fill:#4c78a8}rect.comm{fill:#f58518}rect.wait{fill:#e45756}"
    "rect.bucket{fill:#54a24b}line.ready{stroke:#222;stroke-width:1.5}"
    ".lg span{display:inline-block;width:12px;height:12px;margin:0 4px 0 14px;"
    "vertical-align:-1px}table{border-collapse:collapse;margin-top:14px}"
    "td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}"
    "td:first-child,th:first-child{text-align:left}text{font-size:12px;fill:#333}";

static const char html_script[] =
    "(function(){var T=JSON.parse(document.getElementById('trace').textContent);"
    "var names={},title='',tr=[],seen={},t0=Infinity,t1=-Infinity,tot={},n=0,first={};"
    "T.traceEvents.forEach(function(e){"
    "if(e.ph==='M'&&e.name==='thread_name')names[e.tid]=e.args.name;"
    "else if(e.ph==='M'&&e.name==='process_name')title=e.args.name;"
    "else if(e.ph==='X'){if(!(e.tid in seen)){seen[e.tid]=1;tr.push(e.tid);}"
    "first[e.tid]=Math.min(first[e.tid]===undefined?Infinity:first[e.tid],e.ts);"
    "t0=Math.min(t0,e.ts);t1=Math.max(t1,e.ts+e.dur);"
    "n++;}});"
    "Object.keys(names).forEach(function(t){if(!(t in seen)){seen[t]=1;tr.push(+t);}});"
    "function ord(t){return t>=1048576?(t-1048576)*2+1:t*2;}"
    "tr.sort(function(a,b){return ord(a)-ord(b);});"
    "document.getElementById('title').textContent=title||'(untitled run)';"
    "if(!n){t0=0;t1=1;}var all=t0,from=Math.max.apply(null,Object.keys(first).map("
    "function(k){return first[k];}));if(location.hash!=='#all'&&n&&from>t0&&from<t1){t0=from;"
    "document.getElementById('from').textContent='Drawn from '+((t0-all)/1e6).toFixed(3)+"
    "' s, when the last rank began its first step (what came before is launch and data"
    " loading); add #all to the URL for the whole run.';}"
    "var NS='http://www.w3.org/2000/svg',W=1200,L=170,R=20,H=30,TOP=34;"
    "var svg=document.createElementNS(NS,'svg'),span=t1-t0,V0=t0,V1=t1,sx=1;"
    "function el(k,a,p){var x=document.createElementNS(NS,k);"
    "for(var q in a)x.setAttribute(q,a[q]);(p||svg).appendChild(x);return x;}"
    "svg.setAttribute('width',W);svg.setAttribute('height',TOP+tr.length*H+8);"
    "svg.setAttribute('data-slices',n);var row={};tr.forEach(function(t,i){row[t]=i;});"
    "T.traceEvents.forEach(function(e){if(e.ph!=='X')return;"
    "var a=Math.max(e.ts,t0),d=e.ts+e.dur-a;if(d<=0)return;"
    "var s=tot[e.tid]=tot[e.tid]||{compute:0,comm:0,wait:0};if(e.name in s)s[e.name]+=d;});"
    /* draw the view [V0, V1] (zoom and pan change it and draw again) */
    "function draw(){while(svg.firstChild)svg.removeChild(svg.firstChild);"
    "var vs=V1-V0;sx=(W-L-R)/Math.max(vs,1e-9);"
    "var st=Math.pow(10,Math.floor(Math.log10(vs/8)));"
    "[1,2,5,10].some(function(m){if(vs/(st*m)<=10){st*=m;return true;}});"
    "var us=st>=1e5,unit=us?'s':'ms',div=us?1e6:1e3;"
    "for(var v=Math.ceil((V0-t0)/st-1e-9)*st;v<=V1-t0+1e-9;v+=st){var x=L+(v-(V0-t0))*sx;"
    "el('line',{x1:x,x2:x,y1:TOP-6,y2:TOP+tr.length*H,stroke:'#eee'});"
    "el('text',{x:x,y:TOP-10,'text-anchor':'middle'}).textContent="
    "+(v/div).toPrecision(3)+' '+unit;}"
    "tr.forEach(function(t,i){var y=TOP+i*H;"
    "el('text',{x:6,y:y+H/2+4}).textContent=names[t]||('rank '+t);"
    "el('line',{x1:L,x2:W-R,y1:y+H,y2:y+H,stroke:'#f3f3f3'});});"
    "T.traceEvents.forEach(function(e){if(e.ph==='i'&&e.ts>=V0&&e.ts<=V1&&e.tid in row){"
    "var xi=L+(e.ts-V0)*sx,yi=TOP+row[e.tid]*H;el('line',{class:'ready',x1:xi,x2:xi,y1:yi+2,"
    "y2:yi+H-2});return;}if(e.ph!=='X')return;"
    "var a=Math.max(e.ts,V0),b=Math.min(e.ts+e.dur,V1);if(b<=a)return;"
    "var r=el('rect',{class:e.name,x:L+(a-V0)*sx,y:TOP+row[e.tid]*H+5,"
    "width:Math.max((b-a)*sx,0.6),height:H-10});"
    "el('title',{},r).textContent=e.name+' '+(e.dur/1e3).toFixed(3)+' ms, step '+"
    "(e.args&&e.args.step)+(e.name==='bucket'?', bucket '+e.args.bucket+' of '+e.args.of+"
    "', '+e.args.floats+' floats':'');});}"
    /* zoom by f around time c; pan by dt; both kept inside the run */
    "function view(a,b){var w=Math.min(Math.max(b-a,Math.min(10,span)),span);"
    "a=Math.min(Math.max(a,t0),t1-w);V0=a;V1=a+w;draw();}"
    "function zoom(f,c){view(c-(c-V0)*f,c+(V1-c)*f);}"
    "function at(ev){return V0+(ev.clientX-svg.getBoundingClientRect().left-L)/sx;}"
    "svg.addEventListener('wheel',function(ev){ev.preventDefault();"
    "zoom(ev.deltaY<0?0.8:1.25,at(ev));},{passive:false});"
    "var drag=null;svg.addEventListener('mousedown',function(ev){drag={x:ev.clientX,a:V0,b:V1};"
    "ev.preventDefault();});window.addEventListener('mouseup',function(){drag=null;});"
    "window.addEventListener('mousemove',function(ev){if(!drag)return;"
    "var dt=(drag.x-ev.clientX)/sx;view(drag.a+dt,drag.b+dt);});"
    "var bar=document.getElementById('zoom');"
    "[['zin','zoom in',function(){zoom(0.5,(V0+V1)/2);}],"
    "['zout','zoom out',function(){zoom(2,(V0+V1)/2);}],"
    "['left','\u2190 earlier',function(){view(V0-(V1-V0)/4,V1-(V1-V0)/4);}],"
    "['right','later \u2192',function(){view(V0+(V1-V0)/4,V1+(V1-V0)/4);}],"
    "['reset','whole view',function(){view(t0,t1);}]].forEach(function(b){"
    "var x=document.createElement('button');x.id=b[0];x.textContent=b[1];"
    "x.addEventListener('click',b[2]);bar.appendChild(x);});"
    /* #view=A,B (seconds from the drawn start): open zoomed in */
    "var m=/view=([0-9.]+),([0-9.]+)/.exec(location.hash);"
    "if(m)view(t0+1e6*m[1],t0+1e6*m[2]);else draw();"
    "document.getElementById('tl').appendChild(svg);"
    "var tb=document.getElementById('sum');tr.forEach(function(t){"
    "var s=tot[t]||{compute:0,comm:0,wait:0},b=s.compute+s.comm,"
    "tr2=tb.insertRow(-1);[names[t]||('rank '+t),(s.compute/1e6).toFixed(3),"
    "(s.comm/1e6).toFixed(3),(s.wait/1e6).toFixed(3),(100*b/Math.max(span,1e-9)).toFixed(0)+' %']"
    ".forEach(function(c){tr2.insertCell(-1).textContent=c;});});})();\n";

static int write_html(FILE *f, sqlite3 *db, int64_t run_id, long long *n) {
  char nonce[33];
  if (sg_nonce_hex(nonce) != 0)
    return sg_err_set(SG_EIO, "trace: cannot read /dev/urandom for the page's script nonce");
  fprintf(f,
          "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"
          " style-src 'unsafe-inline'; script-src 'nonce-%s'\">\n"
          "<meta name=\"generator\" content=\"sgdlab trace\">\n"
          "<title>sgdlab trace of run %lld</title><style>%s</style></head><body>\n"
          "<h1 id=\"title\"></h1><p>One track per rank; each step's compute, comm and wait"
          " laid end to end from the step's start (a step records how long each phase took,"
          " not where in the step it fell). An allreduce run's sampled steps add a bucket"
          " track under each rank: each gradient bucket's allreduce where it ran, and a tick"
          " where backward handed the bucket over. Hover a slice for its step and duration; the"
          " table sums the drawn part."
          " <span id=\"from\"></span></p>\n"
          "<div class=\"lg\"><span style=\"background:#4c78a8\"></span>compute"
          "<span style=\"background:#f58518\"></span>comm (moving bytes)"
          "<span style=\"background:#e45756\"></span>wait (blocked on a peer)"
          "<span style=\"background:#54a24b\"></span>bucket allreduce</div>\n"
          "<div id=\"zoom\">zoom: mouse wheel or buttons; pan: drag or buttons </div>\n"
          "<div id=\"tl\"></div>\n<table id=\"sum\"><tr><th>track</th><th>compute s</th>"
          "<th>comm s</th><th>wait s</th><th>compute+comm</th></tr></table>\n"
          "<script type=\"application/json\" id=\"trace\">\n",
          nonce, (long long)run_id, html_style);
  SG_CHECK(write_trace(f, db, run_id, n));
  fprintf(f, "</script>\n<script nonce=\"%s\">\n%s</script>\n</body></html>\n", nonce,
          html_script);
  return SG_OK;
}

typedef struct trace_args {
  const char *db_path, *out, *html;
  long long id;
} trace_args_t;

/* 0: parsed; 1: --help printed; 2: usage error printed. */
static int trace_parse(int argc, char **argv, trace_args_t *a) {
  const char *pos = NULL;
  char *end;
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
      fputs(usage, stdout);
      return 1;
    } else if (!strcmp(s, "--db") || !strcmp(s, "--out") || !strcmp(s, "--html")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "sgdlab trace: %s needs a value\n%s", s, usage);
        return 2;
      }
      *(!strcmp(s, "--db") ? &a->db_path : !strcmp(s, "--out") ? &a->out : &a->html) = argv[++i];
    } else if (s[0] == '-' && s[1]) {
      fprintf(stderr, "sgdlab trace: unknown option '%s'\n%s", s, usage);
      return 2;
    } else if (!pos) {
      pos = s;
    } else {
      fprintf(stderr, "sgdlab trace: unexpected argument '%s'\n%s", s, usage);
      return 2;
    }
  }
  if (!pos) {
    fprintf(stderr, "sgdlab trace: which run? give its id (see `sgdlab list`)\n%s", usage);
    return 2;
  }
  a->id = strtoll(pos, &end, 10);
  if (end == pos || *end || a->id < 0) {
    fprintf(stderr, "sgdlab trace: '%s' is not a run id (see `sgdlab list`)\n", pos);
    return 2;
  }
  return 0;
}

/* The trace (JSON, or the page when html) into path, or standard output. */
static int trace_to(const char *path, int html, sqlite3 *db, int64_t id, long long *n) {
  FILE *f = stdout;
  int rc = SG_OK;
  if (path) SG_CHECK(sg_out_fopen_path(&f, path)); /* outfile.h: ours, renamed into place */
  SG_TRY(html ? write_html(f, db, id, n) : write_trace(f, db, id, n));
  if (fflush(f) != 0 || ferror(f))
    rc = sg_err_set(SG_EIO, "cannot write %s", path ? path : "standard output");
fail:
  if (path && rc < 0) sg_out_discard(f);
  else if (path) rc = sg_out_fclose(f);
  return rc;
}

int sg_cmd_trace(int argc, char **argv) {
  trace_args_t a = {.db_path = SG_DEFAULT_DB};
  sqlite3 *db = NULL;
  long long n = 0;
  int rc = trace_parse(argc, argv, &a);
  if (rc) return rc == 1 ? 0 : 2;
  sg_err_clear();
  if ((a.out && sg_out_check_path(a.out) < 0) || (a.html && sg_out_check_path(a.html) < 0)) {
    fprintf(stderr, "sgdlab trace: %s\n", sg_err_msg()); /* before anything is written */
    return 2;
  }
  SG_TRY(sg_rdb_open(&db, a.db_path));
  if (a.out || !a.html) SG_TRY(trace_to(a.out, 0, db, a.id, &n));
  if (a.out) fprintf(stderr, "trace: %s: %lld slices of run %lld\n", a.out, n, a.id);
  if (a.html) {
    n = 0;
    SG_TRY(trace_to(a.html, 1, db, a.id, &n));
    fprintf(stderr, "trace: %s: %lld slices of run %lld (open it in a browser)\n", a.html, n,
            a.id);
  }
fail:
  sqlite3_close(db);
  if (rc < 0) {
    fprintf(stderr, "sgdlab trace: %s\n", *sg_err_msg() ? sg_err_msg() : sg_strerror(rc));
    return 1;
  }
  return 0;
}
