//! Whose fault an error is: the user's input (a bad id, file, flag or config; exit 2) or the machine,
//! the network, a provider or another process (exit 1). Every error type of the workbench says so itself
//! ([`Classify`], implemented next to the type); the binary's exit code follows from the innermost error
//! of the chain that says (`cli::exit_code`), so a machine failure wrapped in words about the user's
//! input is still the machine's.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// What the user gave: fixing it is the user's to do.
    Input,
    /// The machine, the network, a provider or another process.
    Machine,
}

impl Fault {
    pub fn exit_code(self) -> u8 {
        match self {
            Fault::Input => 2,
            Fault::Machine => 1,
        }
    }
}

/// An error that knows whose fault it is.
pub trait Classify {
    fn fault(&self) -> Fault;

    fn is_input(&self) -> bool {
        self.fault() == Fault::Input
    }
}
