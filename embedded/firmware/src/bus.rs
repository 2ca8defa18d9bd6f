//! A simulated I2C bus with one temperature sensor on it, implementing
//! embedded-hal-async's `I2c` as a HAL's driver does. It fails the way real
//! sensors do: now and then the sensor is busy and does not acknowledge a data
//! byte, now and then it stretches the clock far too long, and for two seconds
//! it is unplugged and does not even acknowledge its address.

use embassy_time::{Duration, Instant};
use embedded_hal_async::i2c::{ErrorKind, ErrorType, I2c, NoAcknowledgeSource, Operation};

/// The sensor's bus address.
pub const SENSOR: u8 = 0x48;
/// Its temperature register.
pub const TEMPERATURE: u8 = 0x00;
/// What it reads: 21.5 °C in 1/128 °C.
pub const TEMPERATURE_RAW: i16 = 2752;

/// When the sensor is unplugged, in milliseconds since boot.
const UNPLUGGED_MS: core::ops::Range<u64> = 2_000..4_000;

pub struct SimulatedBus {
    transfers: u32,
}

impl SimulatedBus {
    pub const fn new() -> Self {
        SimulatedBus { transfers: 0 }
    }
}

impl ErrorType for SimulatedBus {
    type Error = ErrorKind;
}

impl I2c for SimulatedBus {
    async fn transaction(
        &mut self,
        address: u8,
        operations: &mut [Operation<'_>],
    ) -> Result<(), ErrorKind> {
        // A three-byte transfer at 100 kHz: well under a tick.
        crate::pause(Duration::from_ticks(1)).await;
        self.transfers = self.transfers.wrapping_add(1);
        let unplugged = UNPLUGGED_MS.contains(&Instant::now().as_millis());
        if address != SENSOR || unplugged {
            return Err(ErrorKind::NoAcknowledge(NoAcknowledgeSource::Address));
        }
        if self.transfers % 3 == 0 {
            // Busy converting: the register byte is not acknowledged.
            return Err(ErrorKind::NoAcknowledge(NoAcknowledgeSource::Data));
        }
        if self.transfers % 7 == 0 {
            // Clock stretched far past any sane read.
            crate::pause(Duration::from_millis(80)).await;
        }
        for operation in operations.iter_mut() {
            if let Operation::Read(buffer) = operation {
                for (byte, value) in buffer.iter_mut().zip(TEMPERATURE_RAW.to_be_bytes()) {
                    *byte = value;
                }
            }
        }
        Ok(())
    }
}
