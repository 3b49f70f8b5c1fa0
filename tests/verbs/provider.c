/*
 * A software verbs provider for tests: libibverbs.so.1 for collbench's rdma@ path on hosts without an RDMA
 * NIC. It behaves like a RoCE v2 NIC on one network interface (FAKEVERBS_NETDEV, default eth0): one device
 * "emu_roce0" with one Ethernet port whose GID table holds the interface's IPv4 address as a RoCE v2 GID.
 * Reliable-connected queue pairs talk over TCP between the providers of each process: a queue pair number
 * is (listening port << 8 | index), so a requester reaches a responder only with the address (the GID) and
 * the queue pair number it was given, and the responder accepts only the peer its RTR named.
 *
 * It enforces what the kernel and hardware enforce, with their errno or completion status, and says why
 * on stderr ("fakeverbs: ..."): the QP state machine with the required and allowed attribute masks of each
 * transition (ibv_modify_qp(3)), PD ownership, MR bounds and access (lkey on every SGE, rkey and range on
 * every remote address), queue limits as created, RNR retries (IBV_WC_RNR_RETRY_EXC_ERR), transport retries
 * (IBV_WC_RETRY_EXC_ERR) then flushes, in-order completions, CQ overflow. Timings say nothing about hardware.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

#define DEV_NAME "emu_roce0"
#define MAX_QPS 255
#define GID_TBL_LEN 16
#define MAX_WR 16384
#define MAX_SGE 16
#define MAX_INLINE 256
#define MAX_CQE 4194303
#define MAGIC 0x56455242u /* "VERB" */

/* One write per line: ranks of one test share a stderr pipe, and pieces of their lines must not mix. */
static void diag(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = snprintf(line, sizeof(line), "fakeverbs: ");
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(2, line, (size_t)n) < 0)
		return;
}

/* FAKE_CALL_LOG=FILE: each queue pair created appends a line to FILE, so tests can count set-ups per run. */
static void log_call(const char *name)
{
	const char *path = getenv("FAKE_CALL_LOG");
	FILE *f = path ? fopen(path, "a") : NULL;
	if (f) {
		fprintf(f, "%s\n", name);
		fclose(f);
	}
}

/* ---- faults for tests: FAKEVERBS_FAULT=RANK:KIND:N, applied in the process whose COLLBENCH_RANK (or RANK) is RANK ----
 * bad_rkey: the Nth RDMA write with data this process posts carries a wrong rkey (as a broken application
 * would); qp_error: after N accepted writes, the QP that took the Nth moves to the error state (as
 * ibv_modify_qp(IBV_QPS_ERR) would); slow_recv: every ibv_poll_cq that finds a receive completion waits N ms
 * first, so the application sees arrivals late and reposts its receives late (a receiver that is slow to
 * drain its window: senders must wait for credits, and a sender that ignored them would find no receive
 * posted). */

enum fault_kind { FAULT_NONE, FAULT_BAD_RKEY, FAULT_QP_ERROR, FAULT_SLOW_RECV };

static enum fault_kind fault(long *n)
{
	const char *f = getenv("FAKEVERBS_FAULT"), *r = getenv("COLLBENCH_RANK");
	if (!r)
		r = getenv("RANK");
	char kind[32];
	long rank;
	if (!f || !r || sscanf(f, "%ld:%31[a-z_]:%ld", &rank, kind, n) != 3 || rank != atol(r))
		return FAULT_NONE;
	return !strcmp(kind, "bad_rkey")    ? FAULT_BAD_RKEY
	       : !strcmp(kind, "qp_error")  ? FAULT_QP_ERROR
	       : !strcmp(kind, "slow_recv") ? FAULT_SLOW_RECV
					    : FAULT_NONE;
}

/* ---- the interface the device sits on ---- */

static const char *netdev(void)
{
	const char *n = getenv("FAKEVERBS_NETDEV");
	return n && *n ? n : "eth0";
}

/* The interface's first IPv4 address (network order) and MTU; 0 when it has none. */
static int iface_facts(uint32_t *ip, int *mtu, int *up)
{
	struct ifaddrs *ifs, *i;
	int found = 0;
	if (getifaddrs(&ifs))
		return 0;
	for (i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !strcmp(i->ifa_name, netdev())) {
			*ip = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
			*up = (i->ifa_flags & IFF_UP) && (i->ifa_flags & IFF_RUNNING);
			found = 1;
			break;
		}
	freeifaddrs(ifs);
	if (!found)
		return 0;
	struct ifreq r;
	memset(&r, 0, sizeof(r));
	snprintf(r.ifr_name, sizeof(r.ifr_name), "%s", netdev());
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	*mtu = 1500;
	if (s >= 0 && ioctl(s, SIOCGIFMTU, &r) == 0)
		*mtu = r.ifr_mtu;
	if (s >= 0)
		close(s);
	return 1;
}

/* The largest IB MTU that fits the interface's MTU with RoCE v2 headers (as rxe does). */
static enum ibv_mtu ib_mtu(int mtu)
{
	int room = mtu - 20 - 8 - 12 - 4; /* IPv4, UDP, BTH, ICRC */
	if (room >= 4096)
		return IBV_MTU_4096;
	if (room >= 2048)
		return IBV_MTU_2048;
	if (room >= 1024)
		return IBV_MTU_1024;
	if (room >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}

/* ---- objects ---- */

struct fctx;

struct fpd {
	struct ibv_pd ibv;
};

struct fmr {
	struct ibv_mr ibv;
	struct fmr *next;
	int access;
};

struct fcq {
	struct ibv_cq ibv;
	struct ibv_wc *ring;
	int cap, head, count, overflowed;
	int destroyed;
};

struct swqe {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	uint32_t imm; /* network order, as posted */
	uint64_t raddr, laddr;
	uint32_t rkey, lkey, len;
	int signaled;
	int bad_lkey; /* the SGE failed its lkey check: completes with IBV_WC_LOC_PROT_ERR */
	unsigned char *inline_copy;
};

struct fqp {
	struct ibv_qp ibv;
	struct fctx *ctx;
	struct fpd *pd;
	struct fcq *scq, *rcq;
	struct ibv_qp_cap cap;
	int sig_all;
	int destroyed;
	/* attributes set by modify */
	int access;
	uint8_t port, path_mtu, timeout, retry_cnt, rnr_retry, min_rnr_timer;
	uint32_t dest_qpn, dest_ip, rq_psn, sq_psn;
	/* send queue: [head, next) sent and waiting for an ACK, [next, tail) not sent yet */
	struct swqe *sq;
	uint64_t sq_head, sq_next, sq_tail;
	uint64_t acks; /* ACKs seen, so the sender can tell progress from a stall */
	int rewind_rnr; /* an RNR NAK asked the sender to go back to head after the RNR timer */
	int rnr_naks_sent; /* responder: RNR NAKs this QP answered with (the first is reported) */
	int rnr_count;
	int conn_fd; /* requester connection, -1 when not connected */
	int conn_lost;
	pthread_t sender;
	int sender_started;
	pthread_cond_t cv;
	/* receive queue */
	uint64_t *rq;
	uint64_t rq_head, rq_tail;
	uint32_t expected_psn; /* responder: next PSN it accepts */
};

struct fctx {
	struct ibv_context ibv;
	pthread_mutex_t mu;
	int listen_fd;
	uint16_t listen_port;
	uint32_t ip;
	int mtu;
	struct fqp *qps[MAX_QPS + 1];
	int next_qp;
	struct fmr *mrs;
	int pds, cqs; /* allocated and not yet freed: closing the context refuses while any is left */
	uint32_t next_key;
	pthread_t acceptor;
	enum fault_kind fault;
	long fault_n; /* counts down to the fault */
};

static struct ibv_device the_device;

/* ---- wire format ---- */

enum { F_WRITE = 1, F_WRITE_IMM = 2 };
enum { A_ACK = 1, A_NAK_RNR = 2, A_NAK_ACCESS = 3, A_NAK_INVALID = 4 };

struct hello {
	uint32_t magic, src_qpn, dest_qpn;
};

struct frame {
	uint32_t magic, type, psn, imm, rkey, len;
	uint64_t raddr;
};

struct ack {
	uint32_t type, psn;
};

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	char *c = p;
	while (n) {
		ssize_t r = recv(fd, c, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

/* ---- completions (context lock held) ---- */

static void cq_push(struct fcq *cq, const struct ibv_wc *wc)
{
	if (cq->count == cq->cap) {
		if (!cq->overflowed)
			diag("completion queue overflow: %d entries, none polled (CQ error; its QPs stop)", cq->cap);
		cq->overflowed = 1;
		return;
	}
	cq->ring[(cq->head + cq->count) % cq->cap] = *wc;
	cq->count++;
}

static void complete_send(struct fqp *qp, struct swqe *w, enum ibv_wc_status st)
{
	if (st == IBV_WC_SUCCESS && !w->signaled && !qp->sig_all)
		return;
	struct ibv_wc wc;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr_id;
	wc.status = st;
	wc.opcode = IBV_WC_RDMA_WRITE;
	wc.qp_num = qp->ibv.qp_num;
	wc.byte_len = w->len;
	cq_push(qp->scq, &wc);
}

static void free_wqe(struct swqe *w)
{
	free(w->inline_copy);
	w->inline_copy = NULL;
}

/* The QP enters the error state: what is queued completes with IBV_WC_WR_FLUSH_ERR. */
static void enter_error(struct fqp *qp)
{
	qp->ibv.state = IBV_QPS_ERR;
	while (qp->sq_head < qp->sq_tail) {
		struct swqe *w = &qp->sq[qp->sq_head % qp->cap.max_send_wr];
		complete_send(qp, w, IBV_WC_WR_FLUSH_ERR);
		free_wqe(w);
		qp->sq_head++;
	}
	qp->sq_next = qp->sq_tail;
	while (qp->rq_head < qp->rq_tail) {
		struct ibv_wc wc;
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = qp->rq[qp->rq_head % qp->cap.max_recv_wr];
		wc.status = IBV_WC_WR_FLUSH_ERR;
		wc.opcode = IBV_WC_RECV;
		wc.qp_num = qp->ibv.qp_num;
		cq_push(qp->rcq, &wc);
		qp->rq_head++;
	}
	if (qp->conn_fd >= 0)
		shutdown(qp->conn_fd, SHUT_RDWR);
	pthread_cond_broadcast(&qp->cv);
}

/* The oldest outstanding send fails with `st`; the rest is flushed. */
static void fail_head(struct fqp *qp, enum ibv_wc_status st)
{
	if (qp->sq_head < qp->sq_tail) {
		struct swqe *w = &qp->sq[qp->sq_head % qp->cap.max_send_wr];
		complete_send(qp, w, st);
		free_wqe(w);
		qp->sq_head++;
	}
	enter_error(qp);
}

static struct fmr *find_mr(struct fctx *c, uint32_t key, int remote)
{
	for (struct fmr *m = c->mrs; m; m = m->next)
		if ((remote ? m->ibv.rkey : m->ibv.lkey) == key)
			return m;
	return NULL;
}

/* ---- requester ---- */

static double transport_timeout_s(struct fqp *qp)
{
	/* 4.096 us * 2^timeout; 0 means infinite on hardware, taken here as the largest. */
	int t = qp->timeout ? qp->timeout : 31;
	return 4.096e-6 * (double)(1ull << t);
}

static double rnr_delay_s(struct fqp *qp)
{
	/* The min_rnr_timer encoding runs 0.01 ms to 655 ms; 12 is 0.64 ms. */
	static const double ms[32] = { 655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32,
				       0.48,   0.64, 0.96, 1.28, 1.92, 2.56, 3.84, 5.12, 7.68, 10.24, 15.36,
				       20.48,  30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52 };
	return ms[qp->min_rnr_timer & 31] / 1000.0;
}

static void deadline_in(struct timespec *ts, double s)
{
	clock_gettime(CLOCK_REALTIME, ts);
	long ns = ts->tv_nsec + (long)(s * 1e9);
	ts->tv_sec += ns / 1000000000L;
	ts->tv_nsec = ns % 1000000000L;
}

static void sleep_unlocked(struct fqp *qp, double s)
{
	struct timespec ts;
	deadline_in(&ts, s);
	pthread_cond_timedwait(&qp->cv, &qp->ctx->mu, &ts);
}

struct ack_reader {
	struct fqp *qp;
	int fd;
};

/* Reads the responder's ACKs and NAKs on one connection. */
static void *ack_thread(void *arg)
{
	struct ack_reader *a = arg;
	struct fqp *qp = a->qp;
	struct fctx *c = qp->ctx;
	struct ack k;
	while (read_all(a->fd, &k, sizeof(k)) == 0) {
		pthread_mutex_lock(&c->mu);
		if (qp->destroyed || qp->conn_fd != a->fd || qp->ibv.state != IBV_QPS_RTS) {
			pthread_mutex_unlock(&c->mu);
			break;
		}
		/* PSNs count from sq_psn: the WQE at index i went out with sq_psn + i. */
		uint64_t idx = (uint64_t)(uint32_t)(k.psn - qp->sq_psn);
		if (k.type == A_ACK) {
			while (qp->sq_head <= idx && qp->sq_head < qp->sq_next) {
				struct swqe *w = &qp->sq[qp->sq_head % qp->cap.max_send_wr];
				complete_send(qp, w, IBV_WC_SUCCESS);
				free_wqe(w);
				qp->sq_head++;
			}
			qp->acks++;
			qp->rnr_count = 0;
		} else if (k.type == A_NAK_RNR && idx == qp->sq_head) {
			if (qp->rnr_retry != 7 && ++qp->rnr_count > qp->rnr_retry) {
				diag("QP %#x: receiver not ready after %d RNR retries (no receive posted at QP %#x)",
				     qp->ibv.qp_num, qp->rnr_retry, qp->dest_qpn);
				fail_head(qp, IBV_WC_RNR_RETRY_EXC_ERR);
			} else {
				qp->rewind_rnr = 1;
			}
		} else if (k.type == A_NAK_ACCESS && idx == qp->sq_head) {
			fail_head(qp, IBV_WC_REM_ACCESS_ERR);
		} else if (k.type == A_NAK_INVALID && idx == qp->sq_head) {
			fail_head(qp, IBV_WC_REM_INV_REQ_ERR);
		}
		pthread_cond_broadcast(&qp->cv);
		pthread_mutex_unlock(&c->mu);
	}
	pthread_mutex_lock(&c->mu);
	if (qp->conn_fd == a->fd) {
		qp->conn_lost = 1;
		pthread_cond_broadcast(&qp->cv);
	}
	pthread_mutex_unlock(&c->mu);
	free(a);
	return NULL;
}

/* Connects to the responder named by the RTR attributes; -1 when it cannot be reached or refuses. */
static int dial(struct fqp *qp)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = qp->ctx->ip };
	struct sockaddr_in to = { .sin_family = AF_INET,
				  .sin_addr.s_addr = qp->dest_ip,
				  .sin_port = htons((uint16_t)(qp->dest_qpn >> 8)) };
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct hello h = { MAGIC, qp->ibv.qp_num, qp->dest_qpn };
	char ok = 0;
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) || connect(fd, (struct sockaddr *)&to, sizeof(to)) ||
	    write_all(fd, &h, sizeof(h)) || read_all(fd, &ok, 1) || ok != 1) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One per QP in RTS: sends the queued writes in order, retries per timeout/retry_cnt and the RNR timer. */
static void *sender_thread(void *arg)
{
	struct fqp *qp = arg;
	struct fctx *c = qp->ctx;
	int retries = 0;
	uint64_t acks_seen = 0;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		if (qp->destroyed)
			break;
		if (qp->ibv.state != IBV_QPS_RTS) {
			if (qp->ibv.state == IBV_QPS_ERR || qp->ibv.state == IBV_QPS_RESET)
				break;
			pthread_cond_wait(&qp->cv, &c->mu);
			continue;
		}
		if (qp->acks != acks_seen) {
			acks_seen = qp->acks;
			retries = 0;
		}
		if (qp->conn_lost || qp->conn_fd < 0) {
			if (qp->sq_head == qp->sq_tail) {
				/* Nothing to send: connect when there is. */
				if (qp->conn_lost) {
					close(qp->conn_fd);
					qp->conn_fd = -1;
					qp->conn_lost = 0;
				}
				pthread_cond_wait(&qp->cv, &c->mu);
				continue;
			}
			if (qp->conn_lost) {
				close(qp->conn_fd);
				qp->conn_fd = -1;
				qp->conn_lost = 0;
				qp->sq_next = qp->sq_head;
				if (++retries > qp->retry_cnt) {
					diag("QP %#x: peer QP %#x gone (connection lost, %d retries)", qp->ibv.qp_num,
					     qp->dest_qpn, qp->retry_cnt);
					fail_head(qp, IBV_WC_RETRY_EXC_ERR);
					break;
				}
				sleep_unlocked(qp, transport_timeout_s(qp));
				continue;
			}
			pthread_mutex_unlock(&c->mu);
			int fd = dial(qp);
			pthread_mutex_lock(&c->mu);
			if (fd < 0) {
				if (qp->ibv.state == IBV_QPS_RTS && ++retries > qp->retry_cnt) {
					char ip[INET_ADDRSTRLEN];
					inet_ntop(AF_INET, &qp->dest_ip, ip, sizeof(ip));
					diag("QP %#x: no answer from QP %#x at %s after %d retries", qp->ibv.qp_num,
					     qp->dest_qpn, ip, qp->retry_cnt);
					fail_head(qp, IBV_WC_RETRY_EXC_ERR);
					break;
				}
				sleep_unlocked(qp, transport_timeout_s(qp));
				continue;
			}
			qp->conn_fd = fd;
			qp->sq_next = qp->sq_head;
			struct ack_reader *a = malloc(sizeof(*a));
			a->qp = qp;
			a->fd = fd;
			pthread_t t;
			pthread_create(&t, NULL, ack_thread, a);
			pthread_detach(t);
			continue;
		}
		if (qp->rewind_rnr) {
			qp->rewind_rnr = 0;
			sleep_unlocked(qp, rnr_delay_s(qp));
			qp->sq_next = qp->sq_head;
			continue;
		}
		if (qp->sq_next == qp->sq_tail) {
			if (qp->sq_head == qp->sq_next) {
				pthread_cond_wait(&qp->cv, &c->mu);
				continue;
			}
			/* Waiting for ACKs: a stall of one transport timeout is a retry. */
			uint64_t before = qp->acks;
			struct timespec ts;
			deadline_in(&ts, transport_timeout_s(qp));
			int rc = 0;
			while (rc != ETIMEDOUT && qp->acks == before && qp->sq_next == qp->sq_tail &&
			       qp->ibv.state == IBV_QPS_RTS && !qp->conn_lost && !qp->rewind_rnr && !qp->destroyed)
				rc = pthread_cond_timedwait(&qp->cv, &c->mu, &ts);
			if (rc == ETIMEDOUT && qp->acks == before && qp->sq_head < qp->sq_next) {
				if (++retries > qp->retry_cnt) {
					diag("QP %#x: no ACK from QP %#x within %d transport timeouts", qp->ibv.qp_num,
					     qp->dest_qpn, qp->retry_cnt + 1);
					fail_head(qp, IBV_WC_RETRY_EXC_ERR);
					break;
				}
				qp->sq_next = qp->sq_head;
			}
			continue;
		}
		struct swqe *w = &qp->sq[qp->sq_next % qp->cap.max_send_wr];
		if (w->bad_lkey) {
			/* Completions stay in order: the error waits for what went before it. */
			if (qp->sq_head != qp->sq_next) {
				pthread_cond_wait(&qp->cv, &c->mu);
				continue;
			}
			fail_head(qp, IBV_WC_LOC_PROT_ERR);
			break;
		}
		struct frame f = { MAGIC,
				   w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? F_WRITE_IMM : F_WRITE,
				   qp->sq_psn + (uint32_t)qp->sq_next,
				   w->imm,
				   w->rkey,
				   w->len,
				   w->raddr };
		const void *src = w->inline_copy ? (const void *)w->inline_copy : (const void *)(uintptr_t)w->laddr;
		int fd = qp->conn_fd;
		qp->sq_next++;
		pthread_mutex_unlock(&c->mu);
		/* The application keeps the source valid until the completion (or it was copied inline). */
		int bad = write_all(fd, &f, sizeof(f)) || (f.len && write_all(fd, src, f.len));
		pthread_mutex_lock(&c->mu);
		if (bad && qp->conn_fd == fd)
			qp->conn_lost = 1;
	}
	qp->sender_started = 0;
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* ---- responder ---- */

struct responder {
	struct fctx *c;
	struct fqp *qp;
	int fd;
};

static void send_ack(int fd, uint32_t type, uint32_t psn)
{
	struct ack k = { type, psn };
	write_all(fd, &k, sizeof(k));
}

/* Checks a remote write against the responder's QP and MR table; NULL when allowed, else why. */
static const char *remote_check(struct fqp *qp, const struct frame *f)
{
	if (!(qp->access & IBV_ACCESS_REMOTE_WRITE))
		return "the QP was not given IBV_ACCESS_REMOTE_WRITE";
	if (f->len == 0)
		return NULL;
	struct fmr *m = find_mr(qp->ctx, f->rkey, 1);
	if (!m)
		return "no MR has this rkey";
	if (m->ibv.pd != qp->ibv.pd)
		return "the rkey's MR belongs to another PD than the QP";
	if (!(m->access & IBV_ACCESS_REMOTE_WRITE))
		return "the MR was registered without IBV_ACCESS_REMOTE_WRITE";
	uint64_t start = (uint64_t)(uintptr_t)m->ibv.addr;
	if (f->raddr < start || f->raddr + f->len > start + m->ibv.length || f->raddr + f->len < f->raddr)
		return "the range is outside the MR";
	return NULL;
}

static void *responder_thread(void *arg)
{
	struct responder *r = arg;
	struct fctx *c = r->c;
	struct fqp *qp = r->qp;
	struct frame f;
	unsigned char *buf = NULL;
	size_t cap = 0;
	while (read_all(r->fd, &f, sizeof(f)) == 0 && f.magic == MAGIC) {
		if (f.len > cap) {
			free(buf);
			cap = f.len;
			buf = malloc(cap);
		}
		/* Into a private buffer first: the MR may go away while the bytes arrive. */
		if (f.len && read_all(r->fd, buf, f.len))
			break;
		pthread_mutex_lock(&c->mu);
		if (qp->destroyed || (qp->ibv.state != IBV_QPS_RTR && qp->ibv.state != IBV_QPS_RTS)) {
			/* A responder in ERR or RESET drops what arrives: the requester times out. */
			pthread_mutex_unlock(&c->mu);
			break;
		}
		int32_t d = (int32_t)(f.psn - qp->expected_psn);
		if (d != 0) {
			pthread_mutex_unlock(&c->mu);
			if (d < 0)
				send_ack(r->fd, A_ACK, f.psn); /* a duplicate: acknowledged again, not applied */
			continue;
		}
		const char *why = remote_check(qp, &f);
		if (why) {
			diag("QP %#x: RDMA WRITE from QP %#x refused (remote access error): %s (rkey %#x, addr %#llx, "
			     "len %u)",
			     qp->ibv.qp_num, qp->dest_qpn, why, f.rkey, (unsigned long long)f.raddr, f.len);
			pthread_mutex_unlock(&c->mu);
			send_ack(r->fd, A_NAK_ACCESS, f.psn);
			continue;
		}
		if (f.type == F_WRITE_IMM && qp->rq_head == qp->rq_tail) {
			/* Legal (the requester retries per rnr_retry), but an application whose flow control keeps
			 * a receive posted for every write never causes one: said once per QP. */
			if (qp->rnr_naks_sent++ == 0)
				diag("QP %#x: RNR NAK to QP %#x: a WRITE WITH IMM (PSN %u) found no receive posted",
				     qp->ibv.qp_num, qp->dest_qpn, f.psn);
			pthread_mutex_unlock(&c->mu);
			send_ack(r->fd, A_NAK_RNR, f.psn);
			continue;
		}
		if (f.len)
			memcpy((void *)(uintptr_t)f.raddr, buf, f.len);
		if (f.type == F_WRITE_IMM) {
			struct ibv_wc wc;
			memset(&wc, 0, sizeof(wc));
			wc.wr_id = qp->rq[qp->rq_head % qp->cap.max_recv_wr];
			qp->rq_head++;
			wc.status = IBV_WC_SUCCESS;
			wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
			wc.wc_flags = IBV_WC_WITH_IMM;
			wc.imm_data = f.imm;
			wc.byte_len = f.len;
			wc.qp_num = qp->ibv.qp_num;
			wc.src_qp = qp->dest_qpn;
			cq_push(qp->rcq, &wc);
		}
		qp->expected_psn++;
		if (c->fault == FAULT_QP_ERROR && --c->fault_n == 0) {
			diag("FAKEVERBS_FAULT: QP %#x moved to the error state", qp->ibv.qp_num);
			enter_error(qp);
		}
		pthread_mutex_unlock(&c->mu);
		send_ack(r->fd, A_ACK, f.psn);
	}
	free(buf);
	close(r->fd);
	free(r);
	return NULL;
}

static void *acceptor_thread(void *arg)
{
	struct fctx *c = arg;
	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		int fd = accept4(c->listen_fd, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct hello h;
		if (read_all(fd, &h, sizeof(h)) || h.magic != MAGIC) {
			close(fd);
			continue;
		}
		pthread_mutex_lock(&c->mu);
		uint32_t idx = h.dest_qpn & 0xff;
		struct fqp *qp = (h.dest_qpn >> 8) == c->listen_port && idx >= 1 && idx <= MAX_QPS ? c->qps[idx] : NULL;
		const char *why = NULL;
		if (!qp || qp->destroyed)
			why = "no such QP";
		else if (qp->ibv.state != IBV_QPS_RTR && qp->ibv.state != IBV_QPS_RTS)
			why = "the QP is not in RTR or RTS";
		else if (qp->dest_qpn != h.src_qpn || qp->dest_ip != from.sin_addr.s_addr)
			why = "the QP was connected (RTR) to another peer";
		char ok = why ? 0 : 1;
		/* A packet that does not fit a QP of this device (none with that number, not ready to receive, or
		 * connected to another peer) is dropped without a word, as an HCA drops an invalid packet: here it
		 * can be a retry from a peer of an exited process whose port this one now has, and must not fail
		 * this process. The requester sees its retries run out (IBV_WC_RETRY_EXC_ERR); with
		 * FAKEVERBS_TRACE_DROPS set the drop is printed, for debugging the provider. */
		if (why && getenv("FAKEVERBS_TRACE_DROPS")) {
			char ip[INET_ADDRSTRLEN];
			inet_ntop(AF_INET, &from.sin_addr, ip, sizeof(ip));
			fprintf(stderr, "fakeverbs-drop: connection from QP %#x at %s to QP %#x: %s\n", h.src_qpn, ip,
				h.dest_qpn, why);
		}
		pthread_mutex_unlock(&c->mu);
		if (write_all(fd, &ok, 1) || !ok) {
			close(fd);
			continue;
		}
		struct responder *r = malloc(sizeof(*r));
		r->c = c;
		r->qp = qp;
		r->fd = fd;
		pthread_t t;
		pthread_create(&t, NULL, responder_thread, r);
		pthread_detach(t);
	}
}

/* ---- data path ops ---- */

static int f_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct fcq *cq = (struct fcq *)ibcq;
	struct fctx *c = (struct fctx *)ibcq->context;
	pthread_mutex_lock(&c->mu);
	if (c->fault == FAULT_SLOW_RECV && c->fault_n > 0) {
		int recv = 0;
		for (int i = 0; i < cq->count && !recv; i++)
			recv = cq->ring[(cq->head + i) % cq->cap].opcode & IBV_WC_RECV;
		if (recv) {
			static int said;
			if (!said++)
				diag("FAKEVERBS_FAULT: receive completions are polled %ld ms late", c->fault_n);
			pthread_mutex_unlock(&c->mu);
			struct timespec d = { c->fault_n / 1000, (c->fault_n % 1000) * 1000000L };
			nanosleep(&d, NULL);
			pthread_mutex_lock(&c->mu);
		}
	}
	if (cq->overflowed && cq->count == 0) {
		pthread_mutex_unlock(&c->mu);
		errno = EOVERFLOW;
		return -EOVERFLOW;
	}
	int k = 0;
	while (k < n && cq->count) {
		wc[k++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->cap;
		cq->count--;
	}
	pthread_mutex_unlock(&c->mu);
	return k;
}

static int f_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)cq;
	(void)solicited_only;
	return EOPNOTSUPP;
}

static int f_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct fqp *qp = (struct fqp *)ibqp;
	struct fctx *c = qp->ctx;
	int rc = 0;
	pthread_mutex_lock(&c->mu);
	for (; wr; wr = wr->next) {
		const char *why = NULL;
		if (qp->ibv.state != IBV_QPS_RTS && qp->ibv.state != IBV_QPS_ERR)
			why = "the QP is not in RTS", rc = EINVAL;
		else if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
			why = "only RDMA WRITE and RDMA WRITE WITH IMM are emulated", rc = EINVAL;
		else if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge)
			why = "num_sge exceeds the QP's max_send_sge", rc = EINVAL;
		else if (qp->sq_tail - qp->sq_head >= qp->cap.max_send_wr)
			why = "the send queue is full (max_send_wr outstanding)", rc = ENOMEM;
		uint64_t total = 0;
		for (int i = 0; !why && i < wr->num_sge; i++)
			total += wr->sg_list[i].length;
		if (!why && wr->num_sge > 1)
			why = "the emulation gathers one SGE per write", rc = EINVAL;
		if (!why && (wr->send_flags & IBV_SEND_INLINE) && total > qp->cap.max_inline_data)
			why = "inline data exceeds the QP's max_inline_data", rc = EINVAL;
		if (!why && total > (1u << 31))
			why = "message longer than 2 GiB", rc = EINVAL;
		if (why) {
			diag("ibv_post_send on QP %#x: %s", qp->ibv.qp_num, why);
			*bad = wr;
			break;
		}
		struct swqe w;
		memset(&w, 0, sizeof(w));
		w.wr_id = wr->wr_id;
		w.opcode = wr->opcode;
		w.imm = wr->imm_data;
		w.raddr = wr->wr.rdma.remote_addr;
		w.rkey = wr->wr.rdma.rkey;
		w.len = (uint32_t)total;
		w.signaled = !!(wr->send_flags & IBV_SEND_SIGNALED);
		if (total && c->fault == FAULT_BAD_RKEY && --c->fault_n == 0) {
			diag("FAKEVERBS_FAULT: QP %#x posts an RDMA write with a wrong rkey", qp->ibv.qp_num);
			w.rkey ^= 0x7700;
		}
		if (wr->num_sge == 1) {
			const struct ibv_sge *s = &wr->sg_list[0];
			w.laddr = s->addr;
			w.lkey = s->lkey;
			if (wr->send_flags & IBV_SEND_INLINE) {
				w.inline_copy = malloc(s->length ? s->length : 1);
				memcpy(w.inline_copy, (const void *)(uintptr_t)s->addr, s->length);
			} else if (s->length) {
				struct fmr *m = find_mr(c, s->lkey, 0);
				uint64_t start = m ? (uint64_t)(uintptr_t)m->ibv.addr : 0;
				const char *bad_why = !m				  ? "no MR has this lkey"
						      : m->ibv.pd != qp->ibv.pd ? "the lkey's MR belongs to another PD"
						      : s->addr < start || s->addr + s->length > start + m->ibv.length
							      ? "the SGE is outside its MR"
							      : NULL;
				if (bad_why) {
					diag("ibv_post_send on QP %#x: local protection error: %s (lkey %#x, addr %#llx, "
					     "len %u)",
					     qp->ibv.qp_num, bad_why, s->lkey, (unsigned long long)s->addr, s->length);
					w.bad_lkey = 1;
				}
			}
		}
		if (qp->ibv.state == IBV_QPS_ERR) {
			complete_send(qp, &w, IBV_WC_WR_FLUSH_ERR);
			free_wqe(&w);
			continue;
		}
		qp->sq[qp->sq_tail % qp->cap.max_send_wr] = w;
		qp->sq_tail++;
	}
	pthread_cond_broadcast(&qp->cv);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

static int f_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct fqp *qp = (struct fqp *)ibqp;
	struct fctx *c = qp->ctx;
	int rc = 0;
	pthread_mutex_lock(&c->mu);
	for (; wr; wr = wr->next) {
		const char *why = NULL;
		if (qp->ibv.state == IBV_QPS_RESET)
			why = "the QP is in RESET", rc = EINVAL;
		else if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_recv_sge)
			why = "num_sge exceeds the QP's max_recv_sge", rc = EINVAL;
		else if (qp->rq_tail - qp->rq_head >= qp->cap.max_recv_wr)
			why = "the receive queue is full (max_recv_wr posted)", rc = ENOMEM;
		if (why) {
			diag("ibv_post_recv on QP %#x: %s", qp->ibv.qp_num, why);
			*bad = wr;
			break;
		}
		if (qp->ibv.state == IBV_QPS_ERR) {
			struct ibv_wc wc;
			memset(&wc, 0, sizeof(wc));
			wc.wr_id = wr->wr_id;
			wc.status = IBV_WC_WR_FLUSH_ERR;
			wc.opcode = IBV_WC_RECV;
			wc.qp_num = qp->ibv.qp_num;
			cq_push(qp->rcq, &wc);
			continue;
		}
		qp->rq[qp->rq_tail % qp->cap.max_recv_wr] = wr->wr_id;
		qp->rq_tail++;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* ---- device, context, port ---- */

struct ibv_device **ibv_get_device_list(int *num)
{
	uint32_t ip;
	int mtu, up;
	struct ibv_device **list = calloc(2, sizeof(*list));
	int n = 0;
	if (iface_facts(&ip, &mtu, &up)) {
		the_device.node_type = IBV_NODE_CA;
		the_device.transport_type = IBV_TRANSPORT_IB;
		snprintf(the_device.name, sizeof(the_device.name), "%s", DEV_NAME);
		snprintf(the_device.dev_name, sizeof(the_device.dev_name), "uverbs0");
		list[n++] = &the_device;
	}
	if (num)
		*num = n;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *d)
{
	return d->name;
}

struct ibv_context *ibv_open_device(struct ibv_device *d)
{
	uint32_t ip;
	int mtu, up;
	if (d != &the_device || !iface_facts(&ip, &mtu, &up)) {
		errno = ENODEV;
		return NULL;
	}
	struct fctx *c = calloc(1, sizeof(*c));
	c->ibv.device = d;
	c->ibv.ops.poll_cq = f_poll_cq;
	c->ibv.ops.req_notify_cq = f_req_notify_cq;
	c->ibv.ops.post_send = f_post_send;
	c->ibv.ops.post_recv = f_post_recv;
	c->ibv.cmd_fd = -1;
	c->ibv.async_fd = -1;
	c->ibv.num_comp_vectors = 1;
	pthread_mutex_init(&c->ibv.mutex, NULL);
	pthread_mutex_init(&c->mu, NULL);
	c->ip = ip;
	c->mtu = mtu;
	c->next_qp = 1;
	c->next_key = 0x1000 + ((uint32_t)getpid() & 0xfff) * 0x100;
	c->fault = fault(&c->fault_n);
	c->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = ip };
	socklen_t al = sizeof(a);
	if (c->listen_fd < 0 || bind(c->listen_fd, (struct sockaddr *)&a, sizeof(a)) || listen(c->listen_fd, 256) ||
	    getsockname(c->listen_fd, (struct sockaddr *)&a, &al)) {
		int e = errno;
		diag("ibv_open_device: cannot listen on %s: %s", netdev(), strerror(e));
		free(c);
		errno = e;
		return NULL;
	}
	c->listen_port = ntohs(a.sin_port);
	pthread_create(&c->acceptor, NULL, acceptor_thread, c);
	pthread_detach(c->acceptor);
	return &c->ibv;
}

int ibv_close_device(struct ibv_context *ibctx)
{
	struct fctx *c = (struct fctx *)ibctx;
	pthread_mutex_lock(&c->mu);
	int pds = c->pds, cqs = c->cqs;
	pthread_mutex_unlock(&c->mu);
	/* Stricter than rdma-core, which frees what is left and leaves its handles dangling: say so instead. */
	if (pds || cqs) {
		diag("ibv_close_device: %d PD(s) and %d CQ(s) made from this context are still allocated", pds, cqs);
		return EBUSY;
	}
	/* The acceptor and any detached thread may still hold the context: it is left allocated. */
	shutdown(c->listen_fd, SHUT_RDWR);
	return 0;
}

int ibv_query_port(struct ibv_context *ibctx, uint8_t port, struct _compat_ibv_port_attr *out)
{
	struct fctx *c = (struct fctx *)ibctx;
	if (port != 1)
		return EINVAL; /* one port; callers probe for the end of the list this way */
	uint32_t ip;
	int mtu, up;
	if (!iface_facts(&ip, &mtu, &up))
		up = 0, mtu = c->mtu;
	/* Callers pass a full struct ibv_port_attr (the compat layout is its prefix). */
	struct ibv_port_attr *a = (struct ibv_port_attr *)out;
	memset(a, 0, offsetof(struct ibv_port_attr, flags));
	a->state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = ib_mtu(mtu);
	a->gid_tbl_len = GID_TBL_LEN;
	a->max_msg_sz = 1u << 31;
	a->pkey_tbl_len = 1;
	a->lid = 0;
	a->active_width = 2; /* 4X */
	a->active_speed = 32; /* EDR: 25 Gb/s per lane, 100 Gb/s */
	a->phys_state = up ? 5 : 3; /* LinkUp : Disabled */
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

/* GID table: index 0 the link-local RoCE v1 entry, 1 its v2 twin, 2 and 3 the IPv4-mapped v1 and v2. */
static int gid_at(struct fctx *c, int index, union ibv_gid *g, uint32_t *type)
{
	memset(g, 0, sizeof(*g));
	if (index < 0 || index >= GID_TBL_LEN)
		return EINVAL;
	if (index >= 4)
		return ENODATA;
	if (index < 2) {
		g->raw[0] = 0xfe;
		g->raw[1] = 0x80;
		memcpy(&g->raw[12], &c->ip, 4);
		g->raw[8] = 0x02;
		g->raw[11] = 0xff;
	} else {
		g->raw[10] = 0xff;
		g->raw[11] = 0xff;
		memcpy(&g->raw[12], &c->ip, 4);
	}
	*type = index % 2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
	return 0;
}

int ibv_query_gid(struct ibv_context *ibctx, uint8_t port, int index, union ibv_gid *gid)
{
	uint32_t type;
	if (port != 1)
		return errno = EINVAL, -1;
	int rc = gid_at((struct fctx *)ibctx, index, gid, &type);
	if (rc == ENODATA)
		return 0; /* an unused entry reads as zeros */
	return rc ? (errno = rc, -1) : 0;
}

int _ibv_query_gid_ex(struct ibv_context *ibctx, uint32_t port, uint32_t index, struct ibv_gid_entry *e,
		      uint32_t flags, size_t size)
{
	(void)flags;
	if (port != 1 || size < sizeof(*e))
		return EINVAL;
	memset(e, 0, sizeof(*e));
	uint32_t type = 0;
	int rc = gid_at((struct fctx *)ibctx, (int)index, &e->gid, &type);
	if (rc)
		return rc;
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = type;
	e->ndev_ifindex = if_nametoindex(netdev());
	return 0;
}

/* ---- PD, MR, CQ, QP ---- */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ibctx)
{
	struct fctx *c = (struct fctx *)ibctx;
	struct fpd *p = calloc(1, sizeof(*p));
	p->ibv.context = ibctx;
	pthread_mutex_lock(&c->mu);
	c->pds++;
	pthread_mutex_unlock(&c->mu);
	return &p->ibv;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct fctx *c = (struct fctx *)pd->context;
	pthread_mutex_lock(&c->mu);
	int busy = 0;
	for (struct fmr *m = c->mrs; m; m = m->next)
		busy |= m->ibv.pd == pd;
	for (int i = 1; i <= MAX_QPS; i++)
		busy |= c->qps[i] && !c->qps[i]->destroyed && c->qps[i]->ibv.pd == pd;
	if (!busy)
		c->pds--;
	pthread_mutex_unlock(&c->mu);
	if (busy) {
		diag("ibv_dealloc_pd: MRs or QPs still use this PD");
		return EBUSY;
	}
	free(pd);
	return 0;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct fctx *c = (struct fctx *)pd->context;
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
		diag("ibv_reg_mr: remote write needs IBV_ACCESS_LOCAL_WRITE too");
		errno = EINVAL;
		return NULL;
	}
	if (!addr || length == 0) {
		diag("ibv_reg_mr: empty range");
		errno = EINVAL;
		return NULL;
	}
	struct fmr *m = calloc(1, sizeof(*m));
	m->ibv.context = pd->context;
	m->ibv.pd = pd;
	m->ibv.addr = addr;
	m->ibv.length = length;
	m->access = access;
	pthread_mutex_lock(&c->mu);
	/* Keys are distinct and lkey != rkey, as on hardware: using one for the other is caught. */
	c->next_key += 0x100;
	m->ibv.lkey = c->next_key | 0x11;
	m->ibv.rkey = c->next_key | 0x22;
	m->ibv.handle = c->next_key >> 8;
	m->next = c->mrs;
	c->mrs = m;
	pthread_mutex_unlock(&c->mu);
	return &m->ibv;
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct fctx *c = (struct fctx *)mr->context;
	pthread_mutex_lock(&c->mu);
	for (struct fmr **p = &c->mrs; *p; p = &(*p)->next)
		if (&(*p)->ibv == mr) {
			struct fmr *m = *p;
			*p = m->next;
			pthread_mutex_unlock(&c->mu);
			free(m);
			return 0;
		}
	pthread_mutex_unlock(&c->mu);
	return EINVAL;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *ibctx, int cqe, void *cq_context, struct ibv_comp_channel *ch,
			     int vector)
{
	(void)ch;
	(void)vector;
	if (cqe < 1 || cqe > MAX_CQE) {
		diag("ibv_create_cq: %d entries (1 to %d)", cqe, MAX_CQE);
		errno = EINVAL;
		return NULL;
	}
	struct fcq *cq = calloc(1, sizeof(*cq));
	cq->ring = calloc((size_t)cqe, sizeof(struct ibv_wc));
	cq->cap = cqe;
	cq->ibv.context = ibctx;
	cq->ibv.cq_context = cq_context;
	cq->ibv.cqe = cqe;
	struct fctx *c = (struct fctx *)ibctx;
	pthread_mutex_lock(&c->mu);
	c->cqs++;
	pthread_mutex_unlock(&c->mu);
	return &cq->ibv;
}

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct fcq *cq = (struct fcq *)ibcq;
	struct fctx *c = (struct fctx *)ibcq->context;
	pthread_mutex_lock(&c->mu);
	int busy = 0;
	for (int i = 1; i <= MAX_QPS; i++)
		busy |= c->qps[i] && !c->qps[i]->destroyed && (c->qps[i]->scq == cq || c->qps[i]->rcq == cq);
	if (!busy && !cq->destroyed) {
		cq->destroyed = 1;
		c->cqs--;
	}
	pthread_mutex_unlock(&c->mu);
	if (busy) {
		diag("ibv_destroy_cq: QPs still use this CQ");
		return EBUSY;
	}
	/* Left allocated: a detached thread may still complete into it after its QPs went away. */
	return 0;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct fctx *c = (struct fctx *)pd->context;
	const char *why = NULL;
	if (a->qp_type != IBV_QPT_RC)
		why = "only RC queue pairs are emulated";
	else if (!a->send_cq || !a->recv_cq)
		why = "a QP needs a send and a receive CQ";
	else if (a->send_cq->context != pd->context || a->recv_cq->context != pd->context)
		why = "the CQs belong to another device context";
	else if (a->srq)
		why = "SRQs are not emulated";
	else if (a->cap.max_send_wr < 1 || a->cap.max_send_wr > MAX_WR || a->cap.max_recv_wr < 1 ||
		 a->cap.max_recv_wr > MAX_WR)
		why = "max_send_wr and max_recv_wr must be 1 to 16384";
	else if (a->cap.max_send_sge > MAX_SGE || a->cap.max_recv_sge > MAX_SGE)
		why = "max_send_sge and max_recv_sge must be at most 16";
	else if (a->cap.max_inline_data > MAX_INLINE)
		why = "max_inline_data must be at most 256";
	if (why) {
		diag("ibv_create_qp: %s", why);
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&c->mu);
	if (c->next_qp > MAX_QPS) {
		pthread_mutex_unlock(&c->mu);
		diag("ibv_create_qp: the emulated device has %d QPs per context", MAX_QPS);
		errno = ENOMEM;
		return NULL;
	}
	log_call("ibv_create_qp");
	struct fqp *qp = calloc(1, sizeof(*qp));
	int idx = c->next_qp++;
	c->qps[idx] = qp;
	pthread_mutex_unlock(&c->mu);
	qp->ctx = c;
	qp->pd = (struct fpd *)pd;
	qp->scq = (struct fcq *)a->send_cq;
	qp->rcq = (struct fcq *)a->recv_cq;
	qp->cap = a->cap;
	qp->sig_all = a->sq_sig_all;
	qp->sq = calloc(a->cap.max_send_wr, sizeof(struct swqe));
	qp->rq = calloc(a->cap.max_recv_wr, sizeof(uint64_t));
	qp->conn_fd = -1;
	pthread_cond_init(&qp->cv, NULL);
	qp->ibv.context = pd->context;
	qp->ibv.qp_context = a->qp_context;
	qp->ibv.pd = pd;
	qp->ibv.send_cq = a->send_cq;
	qp->ibv.recv_cq = a->recv_cq;
	qp->ibv.qp_num = ((uint32_t)c->listen_port << 8) | (uint32_t)idx;
	qp->ibv.state = IBV_QPS_RESET;
	qp->ibv.qp_type = IBV_QPT_RC;
	return &qp->ibv;
}

static const char *mask_name(int bit)
{
	static const char *names[] = { "IBV_QP_STATE",		"IBV_QP_CUR_STATE",	    "IBV_QP_EN_SQD_ASYNC_NOTIFY",
				       "IBV_QP_ACCESS_FLAGS",	"IBV_QP_PKEY_INDEX",	    "IBV_QP_PORT",
				       "IBV_QP_QKEY",		"IBV_QP_AV",		    "IBV_QP_PATH_MTU",
				       "IBV_QP_TIMEOUT",	"IBV_QP_RETRY_CNT",	    "IBV_QP_RNR_RETRY",
				       "IBV_QP_RQ_PSN",		"IBV_QP_MAX_QP_RD_ATOMIC", "IBV_QP_ALT_PATH",
				       "IBV_QP_MIN_RNR_TIMER", "IBV_QP_SQ_PSN",	    "IBV_QP_MAX_DEST_RD_ATOMIC",
				       "IBV_QP_PATH_MIG_STATE", "IBV_QP_CAP",		    "IBV_QP_DEST_QPN" };
	return bit < (int)(sizeof(names) / sizeof(*names)) ? names[bit] : "an unknown attribute";
}

static const char *state_name(enum ibv_qp_state s)
{
	switch (s) {
	case IBV_QPS_RESET:
		return "RESET";
	case IBV_QPS_INIT:
		return "INIT";
	case IBV_QPS_RTR:
		return "RTR";
	case IBV_QPS_RTS:
		return "RTS";
	case IBV_QPS_SQD:
		return "SQD";
	case IBV_QPS_SQE:
		return "SQE";
	case IBV_QPS_ERR:
		return "ERR";
	default:
		return "an unknown state";
	}
}

/* Required and allowed attribute masks of an RC transition (ibv_modify_qp(3), IB spec table 91). */
static int transition_masks(enum ibv_qp_state from, enum ibv_qp_state to, int *req, int *opt)
{
	*opt = 0;
	if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) {
		*req = IBV_QP_STATE;
		return 1;
	}
	if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
		*req = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		return 1;
	}
	if (from == IBV_QPS_INIT && to == IBV_QPS_INIT) {
		*req = IBV_QP_STATE;
		*opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		return 1;
	}
	if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
		*req = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		*opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
		return 1;
	}
	if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
		*req = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
		       IBV_QP_MAX_QP_RD_ATOMIC;
		*opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_ALT_PATH |
		       IBV_QP_PATH_MIG_STATE;
		return 1;
	}
	if (from == IBV_QPS_RTS && to == IBV_QPS_RTS) {
		*req = IBV_QP_STATE;
		*opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_ALT_PATH |
		       IBV_QP_PATH_MIG_STATE;
		return 1;
	}
	return 0;
}

int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
	struct fqp *qp = (struct fqp *)ibqp;
	struct fctx *c = qp->ctx;
	pthread_mutex_lock(&c->mu);
	enum ibv_qp_state from = qp->ibv.state;
	enum ibv_qp_state to = (mask & IBV_QP_STATE) ? a->qp_state : from;
	int req, opt, rc = EINVAL;
	char why[256] = "";
	if (!transition_masks(from, to, &req, &opt)) {
		snprintf(why, sizeof(why), "no transition from %s to %s", state_name(from), state_name(to));
	} else if ((mask & req) != req) {
		int missing = req & ~mask;
		snprintf(why, sizeof(why), "%s -> %s: required attribute %s missing from the mask", state_name(from),
			 state_name(to), mask_name(__builtin_ctz((unsigned)missing)));
	} else if (mask & ~(req | opt)) {
		int extra = mask & ~(req | opt);
		snprintf(why, sizeof(why), "%s -> %s: attribute %s is not allowed in this transition",
			 state_name(from), state_name(to), mask_name(__builtin_ctz((unsigned)extra)));
	} else if ((mask & IBV_QP_PORT) && a->port_num != 1) {
		snprintf(why, sizeof(why), "port %u does not exist (the device has port 1)", a->port_num);
	} else if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0) {
		snprintf(why, sizeof(why), "pkey_index %u is outside the P_Key table (1 entry)", a->pkey_index);
	} else if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > ib_mtu(c->mtu))) {
		snprintf(why, sizeof(why), "path_mtu %d exceeds the port's active MTU %d", a->path_mtu, ib_mtu(c->mtu));
	} else if ((mask & IBV_QP_AV) && !a->ah_attr.is_global) {
		snprintf(why, sizeof(why), "RoCE needs a GRH: ah_attr.is_global must be 1");
	} else if ((mask & IBV_QP_AV) && (a->ah_attr.grh.sgid_index >= 4 || a->ah_attr.port_num != 1)) {
		snprintf(why, sizeof(why), "ah_attr names sgid_index %u on port %u: no such GID entry",
			 a->ah_attr.grh.sgid_index, a->ah_attr.port_num);
	} else if ((mask & IBV_QP_DEST_QPN) && (a->dest_qp_num == 0 || a->dest_qp_num > 0xffffff)) {
		snprintf(why, sizeof(why), "dest_qp_num %#x is not a 24-bit QP number", a->dest_qp_num);
	} else if ((mask & (IBV_QP_RQ_PSN | IBV_QP_SQ_PSN)) &&
		   (((mask & IBV_QP_RQ_PSN) && a->rq_psn > 0xffffff) || ((mask & IBV_QP_SQ_PSN) && a->sq_psn > 0xffffff))) {
		snprintf(why, sizeof(why), "a PSN exceeds 24 bits");
	} else if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7) {
		snprintf(why, sizeof(why), "retry_cnt %u exceeds 7", a->retry_cnt);
	} else if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7) {
		snprintf(why, sizeof(why), "rnr_retry %u exceeds 7", a->rnr_retry);
	} else if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31) {
		snprintf(why, sizeof(why), "timeout %u exceeds 31", a->timeout);
	} else {
		rc = 0;
	}
	if (!rc && (mask & IBV_QP_AV)) {
		const uint8_t *g = a->ah_attr.grh.dgid.raw;
		static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
		if (memcmp(g, v4, 12) != 0) {
			snprintf(why, sizeof(why), "the destination GID is not an IPv4-mapped RoCE v2 address");
			rc = EINVAL;
		} else if (a->ah_attr.grh.sgid_index % 2 != 1 || a->ah_attr.grh.sgid_index < 2) {
			snprintf(why, sizeof(why), "sgid_index %u is not the RoCE v2 IPv4 entry (3): no route to an IPv4 GID",
				 a->ah_attr.grh.sgid_index);
			rc = EINVAL;
		}
	}
	if (rc) {
		diag("ibv_modify_qp on QP %#x: %s", qp->ibv.qp_num, why);
		pthread_mutex_unlock(&c->mu);
		return rc;
	}
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->access = a->qp_access_flags;
	if (mask & IBV_QP_PORT)
		qp->port = a->port_num;
	if (mask & IBV_QP_PATH_MTU)
		qp->path_mtu = a->path_mtu;
	if (mask & IBV_QP_DEST_QPN)
		qp->dest_qpn = a->dest_qp_num;
	if (mask & IBV_QP_AV)
		memcpy(&qp->dest_ip, &a->ah_attr.grh.dgid.raw[12], 4);
	if (mask & IBV_QP_RQ_PSN)
		qp->rq_psn = qp->expected_psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		qp->sq_psn = a->sq_psn;
	if (mask & IBV_QP_TIMEOUT)
		qp->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		qp->rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->min_rnr_timer = a->min_rnr_timer;
	if (to == IBV_QPS_ERR) {
		enter_error(qp);
	} else if (to == IBV_QPS_RESET) {
		enter_error(qp);
		qp->ibv.state = IBV_QPS_RESET;
	} else {
		qp->ibv.state = to;
	}
	if (to == IBV_QPS_RTS && !qp->sender_started) {
		qp->sender_started = 1;
		pthread_create(&qp->sender, NULL, sender_thread, qp);
		pthread_detach(qp->sender);
	}
	pthread_cond_broadcast(&qp->cv);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct fqp *qp = (struct fqp *)ibqp;
	struct fctx *c = qp->ctx;
	pthread_mutex_lock(&c->mu);
	qp->destroyed = 1;
	if (qp->conn_fd >= 0)
		shutdown(qp->conn_fd, SHUT_RDWR);
	pthread_cond_broadcast(&qp->cv);
	/* Left allocated: its threads see `destroyed` and stop; the QP number is not reused. */
	pthread_mutex_unlock(&c->mu);
	return 0;
}
