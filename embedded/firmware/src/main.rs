//! Firmware for a Cortex-M4F (thumbv7em-none-eabihf): two embassy tasks read the
//! same flaky I2C temperature sensor through `retry-embassy`, behind one shared
//! circuit breaker.
//!
//! Each read is retried under a policy (exponential backoff with full jitter,
//! a 50 ms deadline per attempt); a busy sensor costs a retry, a hung transfer
//! runs into the deadline, and while the sensor is unplugged the breaker opens
//! after three failures in a row, so neither task keeps hammering the bus: their
//! reads are turned away at once until the breaker lets one probe through.
//!
//! Build: `cargo build --release --target thumbv7em-none-eabihf` in this folder.
//! With `--features qemu` it prints what happens and stops after ten seconds,
//! under `qemu-system-arm -M mps2-an386 -nographic -semihosting-config
//! enable=on,target=native -kernel <elf>`.

#![no_std]
#![no_main]

mod bus;
mod time_driver;

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;

use embassy_executor::{Executor, Spawner};
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::mutex::Mutex;
use embassy_time::{Duration as Ticks, Instant, Timer};
use embedded_hal_async::i2c::{ErrorKind, I2c};
use retry_core::{Backoff, BreakerConfig, CircuitOpen, Failure, Jitter, RetryError, RetryPolicy};
use retry_embassy::{Retry, RetryNotice, SharedBreaker};
use static_cell::StaticCell;

use bus::SimulatedBus;

/// The core clock SysTick counts: the MPS2 board's 25 MHz.
const CORE_HZ: u32 = 25_000_000;

type Cs = CriticalSectionRawMutex;
/// The breaker: consecutive failures only, so no window (`0, 0`).
type Breaker = SharedBreaker<Cs, 0, 0>;

static EXECUTOR: StaticCell<Executor> = StaticCell::new();
static BREAKER: StaticCell<Breaker> = StaticCell::new();
/// The bus, shared by both tasks behind embassy-sync's async mutex.
static BUS: Mutex<Cs, SimulatedBus> = Mutex::new(SimulatedBus::new());

/// What happened, for a debugger (or, with `qemu`, the console) to read.
static READINGS: AtomicU32 = AtomicU32::new(0);
static RETRIES: AtomicU32 = AtomicU32::new(0);
static GAVE_UP: AtomicU32 = AtomicU32::new(0);
static TURNED_AWAY: AtomicU32 = AtomicU32::new(0);

/// Sleeps `by`. (`Timer::after` adds with a panic on overflow, 584 million years
/// of ticks away; this saturates.)
pub fn pause(by: Ticks) -> Timer {
    Timer::at(Instant::now().saturating_add(by))
}

/// Reads the temperature register, in 1/128 °C.
async fn read_temperature<B: I2c>(bus: &mut B) -> Result<i16, B::Error> {
    let mut raw = [0u8; 2];
    bus.write_read(bus::SENSOR, &[bus::TEMPERATURE], &mut raw)
        .await?;
    Ok(i16::from_be_bytes(raw))
}

/// Which bus errors are worth another try.
fn classify(error: &ErrorKind) -> Failure {
    match error {
        ErrorKind::NoAcknowledge(_) | ErrorKind::Bus | ErrorKind::ArbitrationLoss => {
            Failure::retryable()
        }
        _ => Failure::permanent(),
    }
}

fn count_retry(notice: &RetryNotice<'_, ErrorKind>) {
    RETRIES.fetch_add(1, Ordering::Relaxed);
    #[cfg(feature = "qemu")]
    cortex_m_semihosting::hprintln!(
        "{:>6} ms  attempt {} {}, retry in {} ms",
        Instant::now().as_millis(),
        notice.attempt,
        if notice.timed_out() { "timed out" } else { "failed" },
        notice.delay.as_millis()
    );
    #[cfg(not(feature = "qemu"))]
    let _ = notice;
}

fn count_give_up(error: &RetryError<ErrorKind>) {
    if error.is_circuit_open() {
        TURNED_AWAY.fetch_add(1, Ordering::Relaxed);
    } else {
        GAVE_UP.fetch_add(1, Ordering::Relaxed);
    }
}

#[embassy_executor::task(pool_size = 2)]
async fn reader(id: u32, policy: RetryPolicy, breaker: &'static Breaker, seed: u64) {
    let retry = Retry::new(policy, seed)
        .classify(classify)
        .on_retry(count_retry)
        .on_give_up(count_give_up)
        .breaker(breaker);
    let mut round: u64 = 0;
    loop {
        // A fresh seed per call: the device's seed, this task, this round.
        let seed = seed ^ (u64::from(id) << 48) ^ round;
        let reading = retry
            .call_seeded(seed, async |_attempt| {
                let mut bus = BUS.lock().await;
                read_temperature(&mut *bus).await
            })
            .await;
        if reading.is_ok() {
            READINGS.fetch_add(1, Ordering::Relaxed);
        }
        #[cfg(feature = "qemu")]
        report(id, &reading, breaker);
        round = round.wrapping_add(1);
        pause(Ticks::from_millis(200)).await;
    }
}

#[cfg(feature = "qemu")]
fn report(id: u32, reading: &Result<retry_core::Success<i16>, RetryError<ErrorKind>>, breaker: &Breaker) {
    use cortex_m_semihosting::hprintln;
    let now = Instant::now().as_millis();
    match reading {
        Ok(ok) => hprintln!(
            "{:>6} ms  reader {}: {} / 128 degC after {} attempt(s), breaker {}",
            now,
            id,
            ok.value,
            ok.attempts,
            breaker.state()
        ),
        Err(e) => hprintln!(
            "{:>6} ms  reader {}: {}, breaker {}",
            now,
            id,
            e,
            breaker.state()
        ),
    }
}

/// Stops QEMU after ten seconds with a summary.
#[cfg(feature = "qemu")]
#[embassy_executor::task]
async fn finish() {
    use cortex_m_semihosting::{debug, hprintln};
    pause(Ticks::from_secs(10)).await;
    hprintln!(
        "summary: readings={} retries={} gave_up={} turned_away={}",
        READINGS.load(Ordering::Relaxed),
        RETRIES.load(Ordering::Relaxed),
        GAVE_UP.load(Ordering::Relaxed),
        TURNED_AWAY.load(Ordering::Relaxed)
    );
    debug::exit(debug::EXIT_SUCCESS);
}

fn policy() -> Result<RetryPolicy, retry_core::PolicyError> {
    RetryPolicy::builder()
        .max_attempts(4)
        .backoff(Backoff::exponential(Duration::from_millis(10), 2.0))
        .max_delay(Duration::from_millis(200))
        .jitter(Jitter::Full)
        .attempt_timeout(Duration::from_millis(50))
        .on_circuit_open(CircuitOpen::GiveUp)
        .build()
}

fn breaker_config() -> Result<BreakerConfig, retry_core::BreakerError> {
    BreakerConfig::builder()
        .failure_threshold(3)
        .open_duration(Duration::from_millis(500))
        .half_open_permits(1)
        .success_threshold(2)
        .build()
}

/// The jitter seed. On a chip with one, read the RNG peripheral here (or the
/// unique device ID): what matters is that devices differ, so a fleet does not
/// retry in step. The MPS2 has neither; its CPUID and the SysTick count at boot
/// stand in.
fn device_seed(cpuid: u32) -> u64 {
    let systick = cortex_m::peripheral::SYST::get_current();
    (u64::from(cpuid) << 32 | u64::from(systick)) ^ 0x9e37_79b9_7f4a_7c15
}

fn spawn_all(spawner: Spawner, seed: u64) {
    let (Ok(policy), Ok(config)) = (policy(), breaker_config()) else {
        return;
    };
    let Some(breaker) = SharedBreaker::new(config)
        .ok()
        .and_then(|b| BREAKER.try_init(b))
    else {
        return;
    };
    let breaker: &'static Breaker = breaker;
    for id in 0..2 {
        if let Ok(task) = reader(id, policy, breaker, seed) {
            spawner.spawn(task);
        }
    }
    #[cfg(feature = "qemu")]
    if let Ok(task) = finish() {
        spawner.spawn(task);
    }
}

#[cortex_m_rt::entry]
fn main() -> ! {
    if let Some(peripherals) = cortex_m::Peripherals::take() {
        let seed = device_seed(peripherals.CPUID.base.read());
        time_driver::start(peripherals.SYST, CORE_HZ);
        if let Some(executor) = EXECUTOR.try_init(Executor::new()) {
            executor.run(|spawner| spawn_all(spawner, seed));
        }
    }
    // Reached only if the peripherals or the executor were taken twice.
    loop {
        cortex_m::asm::wfi();
    }
}

#[cfg(not(feature = "panic-never"))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {
        cortex_m::asm::udf();
    }
}

/// Links only if the optimiser removed every call to it: any panic path left in
/// the program is an undefined symbol, and the link error names who calls it.
#[cfg(feature = "panic-never")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    unsafe extern "Rust" {
        fn a_panic_path_is_left_in_the_firmware() -> !;
    }
    // SAFETY: never called: the symbol does not exist, so a build in which this
    // line survives does not link.
    unsafe { a_panic_path_is_left_in_the_firmware() }
}
