//! proxy-wasm binding: a `RootContext` that loads the configuration and an
//! `HttpContext` per stream that forwards callbacks to [`HttpFilter`].
//!
//! The SDK's convenience methods panic on any unexpected host status (and a
//! panic kills the VM for every stream on the worker), so the calls whose
//! status depends on stream state (body buffer access, header mutation,
//! local replies, resuming) go through the proxy-wasm ABI directly and turn
//! failures into logged errors.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::{Rc, Weak};
use std::time::{Duration, UNIX_EPOCH};

use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action as WasmAction, ContextType, LogLevel};
use semroute_proto::{CLASSIFIER_SERVICE, CLASSIFY_METHOD};

use crate::compression::TokenCalibration;
use crate::config::FilterConfig;
use crate::filter::{Action, Host, HostError, HttpFilter};
use crate::header_map;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(SemrouteRoot::default()) });
}}

/// Period of the root context's tick while some stream has a scan backlog.
const BACKLOG_TICK: Duration = Duration::from_millis(1);

// proxy-wasm ABI constants.
const BUFFER_HTTP_REQUEST_BODY: u32 = 0;
const BUFFER_HTTP_RESPONSE_BODY: u32 = 1;
const BUFFER_GRPC_RECEIVE: u32 = 5;
const MAP_HTTP_REQUEST_HEADERS: u32 = 0;
const MAP_HTTP_RESPONSE_HEADERS: u32 = 2;
const STREAM_HTTP_REQUEST: u32 = 0;
const STATUS_OK: u32 = 0;
const STATUS_NOT_FOUND: u32 = 1;
const METRIC_COUNTER: u32 = 0;

#[link(wasm_import_module = "env")]
extern "C" {
    fn proxy_get_buffer_bytes(
        buffer_type: u32,
        start: usize,
        max_size: usize,
        return_buffer_data: *mut *mut u8,
        return_buffer_size: *mut usize,
    ) -> u32;
    fn proxy_set_buffer_bytes(
        buffer_type: u32,
        start: usize,
        size: usize,
        buffer_data: *const u8,
        buffer_size: usize,
    ) -> u32;
    fn proxy_replace_header_map_value(
        map_type: u32,
        key_data: *const u8,
        key_size: usize,
        value_data: *const u8,
        value_size: usize,
    ) -> u32;
    fn proxy_remove_header_map_value(map_type: u32, key_data: *const u8, key_size: usize) -> u32;
    fn proxy_send_local_response(
        status_code: u32,
        status_code_details_data: *const u8,
        status_code_details_size: usize,
        body_data: *const u8,
        body_size: usize,
        headers_data: *const u8,
        headers_size: usize,
        grpc_status: i32,
    ) -> u32;
    fn proxy_continue_stream(stream_type: u32) -> u32;
    fn proxy_get_status(
        return_code: *mut u32,
        return_message_data: *mut *mut u8,
        return_message_size: *mut usize,
    ) -> u32;
    fn proxy_get_header_map_value(
        map_type: u32,
        key_data: *const u8,
        key_size: usize,
        return_value_data: *mut *mut u8,
        return_value_size: *mut usize,
    ) -> u32;
    fn proxy_get_header_map_pairs(
        map_type: u32,
        return_map_data: *mut *mut u8,
        return_map_size: *mut usize,
    ) -> u32;
    fn proxy_define_metric(
        metric_type: u32,
        name_data: *const u8,
        name_size: usize,
        return_id: *mut u32,
    ) -> u32;
    fn proxy_increment_metric(metric_id: u32, offset: i64) -> u32;
}

thread_local! {
    /// Ids of the counters defined so far on this worker, by name.
    static COUNTERS: RefCell<HashMap<String, u32>> = RefCell::new(HashMap::new());
}

/// The id of counter `name`, defined on first use.
fn counter_id(name: &str) -> Result<u32, HostError> {
    if let Some(id) = COUNTERS.with(|c| c.borrow().get(name).copied()) {
        return Ok(id);
    }
    let mut id = 0u32;
    // SAFETY: pointer and length describe a live slice, `id` a live u32, for the call.
    let s = unsafe { proxy_define_metric(METRIC_COUNTER, name.as_ptr(), name.len(), &mut id) };
    check("define_metric", s)?;
    COUNTERS.with(|c| c.borrow_mut().insert(name.to_string(), id));
    Ok(id)
}

/// Takes ownership of a buffer the host allocated in this module (`proxy_on_memory_allocate`,
/// a `Vec<u8>` of capacity `size`) and returned through `data`/`size` with status `status`.
fn host_bytes(status: u32, data: *mut u8, size: usize) -> Result<Option<Vec<u8>>, u32> {
    match status {
        STATUS_OK if data.is_null() => Ok(Some(Vec::new())),
        // SAFETY: the host wrote a pointer to memory from this module's allocator, of
        // capacity `size`, whose ownership passes to us.
        STATUS_OK => Ok(Some(unsafe { Vec::from_raw_parts(data, size, size) })),
        STATUS_NOT_FOUND => Ok(None),
        s => Err(s),
    }
}

/// The value of header `name` in map `map_type`, as raw bytes (header values may hold any
/// byte but NUL, CR and LF: HTTP/1.1 `obs-text`, RFC 9110 section 5.5).
fn get_header_bytes(map_type: u32, name: &str) -> Result<Option<Vec<u8>>, u32> {
    let mut data: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: `name` is a live slice for the call; see `host_bytes` for the result.
    let status = unsafe {
        proxy_get_header_map_value(map_type, name.as_ptr(), name.len(), &mut data, &mut size)
    };
    host_bytes(status, data, size)
}

/// The serialised pairs of header map `map_type` (see [`header_map`]).
fn get_header_pairs(map_type: u32) -> Result<Vec<u8>, u32> {
    let mut data: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: see `host_bytes`.
    let status = unsafe { proxy_get_header_map_pairs(map_type, &mut data, &mut size) };
    host_bytes(status, data, size).map(Option::unwrap_or_default)
}

fn get_buffer(buffer_type: u32, start: usize, max_size: usize) -> Result<Option<Vec<u8>>, u32> {
    let mut data: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: the host writes a pointer to memory it obtained from this
    // module's allocator (`proxy_on_memory_allocate`, a `Vec<u8>` of
    // capacity `size`), whose ownership passes to us.
    let status =
        unsafe { proxy_get_buffer_bytes(buffer_type, start, max_size, &mut data, &mut size) };
    match status {
        STATUS_OK if data.is_null() => Ok(None),
        // SAFETY: see above; capacity equals the allocated size.
        STATUS_OK => Ok(Some(unsafe { Vec::from_raw_parts(data, size, size) })),
        STATUS_NOT_FOUND => Ok(None),
        s => Err(s),
    }
}

fn check(call: &'static str, status: u32) -> Result<(), HostError> {
    if status == STATUS_OK {
        Ok(())
    } else {
        Err(HostError { call, status })
    }
}

fn log_err(r: Result<(), HostError>) {
    if let Err(e) = r {
        log::warn!("semroute: {e}");
    }
}

fn set_header(map: u32, name: &str, value: &str) -> Result<(), HostError> {
    // SAFETY: pointers and lengths describe live slices for the call.
    let s = unsafe {
        proxy_replace_header_map_value(map, name.as_ptr(), name.len(), value.as_ptr(), value.len())
    };
    check("replace_header_map_value", s)
}

/// A stream's filter as the root context reaches it: the stream's context id and its
/// filter, which the stream's context owns.
type StreamRef = (u32, Weak<RefCell<HttpFilter>>);

/// The streams of one worker whose work continues outside their own callbacks: those
/// with a scan backlog (`limits.max_scan_bytes_per_callback`), and the `Classify` calls
/// such a continuation dispatched, whose replies proxy-wasm delivers to the root context.
///
/// The root context continues one step per tick and returns to Envoy's event loop in
/// between, so the worker's other events (other streams' data, replies, timers) run
/// between two steps. A timer is what yields: work posted to the event loop (a shared
/// queue's `on_queue_ready`) runs in the same loop iteration, before waiting I/O.
#[derive(Default)]
struct Backlogs {
    /// Streams with a backlog, in the order they are served (one step per tick).
    queue: VecDeque<StreamRef>,
    /// `Classify` calls dispatched from the tick, by token.
    calls: HashMap<u32, StreamRef>,
    /// The tick is on.
    ticking: bool,
}

impl Backlogs {
    /// Queues stream `id` unless it is queued already, and turns the tick on.
    fn enqueue(&mut self, id: u32, filter: &Rc<RefCell<HttpFilter>>) {
        if !self.queue.iter().any(|(queued, _)| *queued == id) {
            self.queue.push_back((id, Rc::downgrade(filter)));
        }
        if !self.ticking {
            match hostcalls::set_tick_period(BACKLOG_TICK) {
                Ok(()) => self.ticking = true,
                Err(s) => log::warn!("semroute: cannot start the backlog tick: {s:?}"),
            }
        }
    }
}

#[derive(Default)]
struct SemrouteRoot {
    config: Option<Rc<FilterConfig>>,
    calibration: Rc<Cell<TokenCalibration>>,
    backlogs: Rc<RefCell<Backlogs>>,
}

impl Context for SemrouteRoot {
    /// Replies to calls dispatched from the tick arrive here (proxy-wasm attributes a call
    /// to the context that was active when it was made). The reply and its status are
    /// read in this context, then handed to the stream's filter as its effective context.
    fn on_grpc_call_response(&mut self, token_id: u32, status_code: u32, response_size: usize) {
        let entry = self.backlogs.borrow_mut().calls.remove(&token_id);
        let Some((id, filter)) = entry else {
            return;
        };
        let Some(filter) = filter.upgrade() else {
            return;
        };
        let mut host = WasmHost {
            grpc_reply: Some(GrpcReply {
                body: get_buffer(BUFFER_GRPC_RECEIVE, 0, response_size)
                    .ok()
                    .flatten(),
                status_message: grpc_status_message(),
            }),
        };
        if hostcalls::set_effective_context(id).is_err() {
            return;
        }
        let Ok(mut filter) = filter.try_borrow_mut() else {
            return;
        };
        filter.on_grpc_response(&mut host, token_id, status_code, response_size);
    }
}

impl SemrouteRoot {
    /// One scan step for the stream at the head of the backlog queue, which goes to the
    /// back while it has more; the tick stops when the queue is empty.
    fn continue_backlog(&mut self) {
        let next = self.backlogs.borrow_mut().queue.pop_front();
        if let Some((id, weak)) = next {
            if let Some(filter) = weak.upgrade() {
                if hostcalls::set_effective_context(id).is_ok() {
                    if let Ok(mut f) = filter.try_borrow_mut() {
                        let before = f.call_in_flight();
                        f.on_backlog(&mut WasmHost::default());
                        let mut backlogs = self.backlogs.borrow_mut();
                        match f.call_in_flight() {
                            Some(token) if before != Some(token) => {
                                backlogs.calls.insert(token, (id, Weak::clone(&weak)));
                            }
                            _ => {}
                        }
                        if f.has_backlog() {
                            backlogs.queue.push_back((id, weak));
                        }
                    }
                }
            }
        }
        let mut backlogs = self.backlogs.borrow_mut();
        if backlogs.queue.is_empty() && backlogs.ticking {
            match hostcalls::set_tick_period(Duration::ZERO) {
                Ok(()) => backlogs.ticking = false,
                Err(s) => log::warn!("semroute: cannot stop the backlog tick: {s:?}"),
            }
        }
    }
}

impl RootContext for SemrouteRoot {
    fn on_configure(&mut self, _plugin_configuration_size: usize) -> bool {
        let bytes = match get_buffer(7, 0, usize::MAX) {
            Ok(Some(b)) => b,
            Ok(None) => {
                log::error!("semroute: missing filter configuration (at least {{\"default_model\": ...}} is required)");
                return false;
            }
            Err(s) => {
                log::error!("semroute: cannot read the filter configuration (status {s})");
                return false;
            }
        };
        match FilterConfig::from_json(&bytes) {
            Ok(c) => {
                log::info!(
                    "semroute: configured: default model {}, {} decisions, daemon cluster {} ({} ms), failure mode {:?}",
                    c.default_model,
                    c.decisions.len(),
                    c.daemon.cluster,
                    c.daemon.timeout_ms,
                    c.failure_mode
                );
                self.calibration
                    .set(TokenCalibration::new(c.compression.token_ratio));
                self.config = Some(Rc::new(c));
                true
            }
            Err(e) => {
                log::error!("semroute: {e}");
                false
            }
        }
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        let config = self.config.clone()?;
        Some(Box::new(SemrouteHttp {
            id: context_id,
            filter: Rc::new(RefCell::new(HttpFilter::new(
                config,
                Rc::clone(&self.calibration),
            ))),
            backlogs: Rc::clone(&self.backlogs),
        }))
    }

    fn on_tick(&mut self) {
        self.continue_backlog();
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct SemrouteHttp {
    /// This stream's context id.
    id: u32,
    /// Shared with the root context, which continues a scan backlog from its tick.
    filter: Rc<RefCell<HttpFilter>>,
    backlogs: Rc<RefCell<Backlogs>>,
}

impl SemrouteHttp {
    /// Runs `f` on the filter, then queues the stream for the tick if it left a backlog.
    fn with_filter<T>(&mut self, f: impl FnOnce(&mut HttpFilter) -> T) -> Option<T> {
        let Ok(mut filter) = self.filter.try_borrow_mut() else {
            log::warn!("semroute: stream {} re-entered its filter", self.id);
            return None;
        };
        let out = f(&mut filter);
        if filter.has_backlog() {
            self.backlogs.borrow_mut().enqueue(self.id, &self.filter);
        }
        Some(out)
    }
}

/// A `Classify` reply read in the context it was delivered to.
struct GrpcReply {
    body: Option<Vec<u8>>,
    status_message: Option<String>,
}

/// [`Host`] over the proxy-wasm ABI for the stream that is the effective context.
#[derive(Default)]
struct WasmHost {
    /// A reply delivered to the root context, read there before the stream became the
    /// effective context; `None`: read the reply from the current context.
    grpc_reply: Option<GrpcReply>,
}

/// The gRPC status message of the current callback, read as bytes (the SDK's accessor
/// panics on a message that is not UTF-8).
fn grpc_status_message() -> Option<String> {
    let mut code: u32 = 0;
    let mut data: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: as in `get_buffer`, the host hands over a buffer it allocated through
    // this module's allocator, `size` bytes long.
    let status = unsafe { proxy_get_status(&mut code, &mut data, &mut size) };
    if status != STATUS_OK || data.is_null() {
        return None;
    }
    // SAFETY: see above; capacity equals the allocated size.
    let bytes = unsafe { Vec::from_raw_parts(data, size, size) };
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

impl Host for WasmHost {
    fn request_header(&self, name: &str) -> Option<String> {
        // The SDK's accessors panic on a value that is not UTF-8, which any client can send.
        match get_header_bytes(MAP_HTTP_REQUEST_HEADERS, name) {
            Ok(v) => v.map(|b| String::from_utf8_lossy(&b).into_owned()),
            Err(s) => {
                log::warn!("semroute: reading request header {name} failed with status {s}");
                None
            }
        }
    }

    fn request_header_names(&self) -> Vec<String> {
        match get_header_pairs(MAP_HTTP_REQUEST_HEADERS) {
            Ok(map) => header_map::names(&map),
            Err(s) => {
                log::warn!("semroute: reading the request headers failed with status {s}");
                Vec::new()
            }
        }
    }

    fn set_request_header(&mut self, name: &str, value: &str) {
        log_err(set_header(MAP_HTTP_REQUEST_HEADERS, name, value));
    }

    fn remove_request_header(&mut self, name: &str) {
        // SAFETY: pointer and length describe a live slice for the call.
        let s = unsafe {
            proxy_remove_header_map_value(MAP_HTTP_REQUEST_HEADERS, name.as_ptr(), name.len())
        };
        log_err(check("remove_header_map_value", s));
    }

    fn set_response_header(&mut self, name: &str, value: &str) {
        log_err(set_header(MAP_HTTP_RESPONSE_HEADERS, name, value));
    }

    fn response_header(&self, name: &str) -> Option<String> {
        match get_header_bytes(MAP_HTTP_RESPONSE_HEADERS, name) {
            Ok(v) => v.map(|b| String::from_utf8_lossy(&b).into_owned()),
            Err(s) => {
                log::warn!("semroute: reading response header {name} failed with status {s}");
                None
            }
        }
    }

    fn remove_response_header(&mut self, name: &str) {
        // SAFETY: pointer and length describe a live slice for the call.
        let s = unsafe {
            proxy_remove_header_map_value(MAP_HTTP_RESPONSE_HEADERS, name.as_ptr(), name.len())
        };
        log_err(check("remove_header_map_value", s));
    }

    fn response_body(&self, start: usize, len: usize) -> Option<Vec<u8>> {
        match get_buffer(BUFFER_HTTP_RESPONSE_BODY, start, len) {
            Ok(b) => b,
            Err(s) => {
                log::warn!("semroute: reading the response body failed with status {s}");
                None
            }
        }
    }

    fn set_response_body(
        &mut self,
        start: usize,
        len: usize,
        bytes: &[u8],
    ) -> Result<(), HostError> {
        // SAFETY: pointer and length describe a live slice for the call.
        let s = unsafe {
            proxy_set_buffer_bytes(
                BUFFER_HTTP_RESPONSE_BODY,
                start,
                len,
                bytes.as_ptr(),
                bytes.len(),
            )
        };
        check("set_buffer_bytes", s)
    }

    fn increment_counter(&mut self, name: &str, by: u64) {
        let result = counter_id(name).and_then(|id| {
            // SAFETY: no pointers involved.
            let s = unsafe { proxy_increment_metric(id, i64::try_from(by).unwrap_or(i64::MAX)) };
            check("increment_metric", s)
        });
        log_err(result);
    }

    fn request_body(&self, start: usize, len: usize) -> Option<Vec<u8>> {
        match get_buffer(BUFFER_HTTP_REQUEST_BODY, start, len) {
            Ok(b) => b,
            Err(s) => {
                log::warn!("semroute: reading the request body failed with status {s}");
                None
            }
        }
    }

    fn replace_body_prefix(&mut self, drain: usize, prefix: &[u8]) -> Result<(), HostError> {
        // SAFETY: pointer and length describe a live slice for the call.
        let s = unsafe {
            proxy_set_buffer_bytes(
                BUFFER_HTTP_REQUEST_BODY,
                0,
                drain,
                prefix.as_ptr(),
                prefix.len(),
            )
        };
        check("set_buffer_bytes", s)
    }

    fn dispatch_classify(
        &mut self,
        cluster: &str,
        message: &[u8],
        timeout: Duration,
    ) -> Result<u32, HostError> {
        hostcalls::dispatch_grpc_call(
            cluster,
            CLASSIFIER_SERVICE,
            CLASSIFY_METHOD,
            Vec::new(),
            Some(message),
            timeout,
        )
        .map_err(|s| HostError {
            call: "grpc_call",
            status: s as u32,
        })
    }

    fn grpc_response_body(&self, len: usize) -> Option<Vec<u8>> {
        match &self.grpc_reply {
            Some(reply) => reply.body.clone(),
            None => get_buffer(BUFFER_GRPC_RECEIVE, 0, len).ok().flatten(),
        }
    }

    fn grpc_status_message(&self) -> Option<String> {
        match &self.grpc_reply {
            Some(reply) => reply.status_message.clone(),
            None => grpc_status_message(),
        }
    }

    fn send_response(&mut self, status: u16, headers: &[(&str, &str)], body: &[u8]) {
        let h = header_map::serialize(headers);
        // SAFETY: pointers and lengths describe live slices for the call.
        let s = unsafe {
            proxy_send_local_response(
                u32::from(status),
                std::ptr::null(),
                0,
                body.as_ptr(),
                body.len(),
                h.as_ptr(),
                h.len(),
                -1,
            )
        };
        log_err(check("send_local_response", s));
    }

    fn resume_request(&mut self) {
        // SAFETY: no pointers involved.
        let s = unsafe { proxy_continue_stream(STREAM_HTTP_REQUEST) };
        log_err(check("continue_stream", s));
    }

    fn now_us(&self) -> u64 {
        hostcalls::get_current_time()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_micros() as u64)
    }
}

fn to_wasm(a: Action) -> WasmAction {
    match a {
        Action::Continue => WasmAction::Continue,
        Action::Pause => WasmAction::Pause,
    }
}

impl Context for SemrouteHttp {
    fn on_grpc_call_response(&mut self, token_id: u32, status_code: u32, response_size: usize) {
        self.with_filter(|f| {
            f.on_grpc_response(
                &mut WasmHost::default(),
                token_id,
                status_code,
                response_size,
            )
        });
    }
}

impl HttpContext for SemrouteHttp {
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> WasmAction {
        self.with_filter(|f| f.on_request_headers(&mut WasmHost::default(), end_of_stream))
            .map_or(WasmAction::Pause, to_wasm)
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> WasmAction {
        self.with_filter(|f| f.on_request_body(&mut WasmHost::default(), body_size, end_of_stream))
            .map_or(WasmAction::Pause, to_wasm)
    }

    fn on_http_request_trailers(&mut self, _num_trailers: usize) -> WasmAction {
        self.with_filter(|f| f.on_request_trailers(&mut WasmHost::default()))
            .map_or(WasmAction::Pause, to_wasm)
    }

    fn on_http_response_headers(
        &mut self,
        _num_headers: usize,
        _end_of_stream: bool,
    ) -> WasmAction {
        self.with_filter(|f| f.on_response_headers(&mut WasmHost::default()))
            .map_or(WasmAction::Continue, to_wasm)
    }

    fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> WasmAction {
        self.with_filter(|f| f.on_response_body(&mut WasmHost::default(), body_size, end_of_stream))
            .map_or(WasmAction::Continue, to_wasm)
    }
}
