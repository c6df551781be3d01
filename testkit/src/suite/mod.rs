//! [`suite!`](crate::suite): the one macro that stamps the kit's cases into
//! tests, family by family, and the one list of cases it stamps.
//!
//! The list is split by family over [`core_families`], [`port_families`]
//! and [`policy_families`] (a family name one list does not know falls
//! through to the next); both `suite!` and [`CASES`](crate::CASES) are
//! expanded from it, and a tidy test checks that every `pub async fn`
//! under `cases/` is on it.

mod core_families;
mod policy_families;
mod port_families;

/// Stamps the cases of the families listed into
/// `#[tokio::test(flavor = "multi_thread", worker_threads = 4)]` tests for
/// one backend.
///
/// ```text
/// flowstate_testkit::suite!(<module name>, <harness factory>, [<family>, ...]);
/// ```
///
/// - `<module name>` names the module the tests go in (one per backend, so
///   one test binary can hold several).
/// - `<harness factory>` is an expression evaluating to a future of a fresh
///   [`Harness`](crate::Harness), evaluated once per test, for example
///   `async { MemoryHarness::new() }` or `StoreHarness::create(open)`. Names
///   in it resolve where the macro is called.
/// - The families are core's port families, `runs`, `steps`, `versions`
///   (every [`Store`](flowstate_core::ports::Store) has these three),
///   `batch`, `leases`, `waits`, `children`, `effects`, `definitions`,
///   `events`, `recovery`, `virtual_users`, `retention`; the policy families `pool`,
///   `sweeps`, `guard`, `ticks`, `dispatch`, which drive a policy crate over
///   the ports; and `hooks`, for a harness that implements
///   [`Hooks`](crate::Hooks), which adds the cases of every family listed
///   that reach behind the store. What each family needs of the harness is
///   its trait in [`family`](crate::family): a store without a family's
///   port is one compile error naming that family.
///
/// The test for case `cases::steps::claim_races::claim_pending_race_32` is
/// `<module name>::steps::claim_races::claim_pending_race_32`, and a hook
/// case's is under `<family>::hooks::`, so `cargo test claim_races` runs one
/// group and `cargo test ::hooks::` the hook cases. The expansion refers to
/// this crate as `::flowstate_testkit` (the tokio test macro needs a literal
/// path), so depend on it under that name; no direct tokio dependency is
/// needed. Each test builds a harness, runs the case on it, then calls
/// [`Harness::teardown`](crate::Harness::teardown).
///
/// `[all]` is every family above and `hooks`: what a full backend runs
/// (the reference backend, each dialect, the kit through a pooler), named
/// once here so a new family reaches every one of them.
#[macro_export]
macro_rules! suite {
    ($suite:ident, $factory:expr, [all] $(,)?) => {
        $crate::suite!(
            $suite,
            $factory,
            [
                runs,
                steps,
                versions,
                batch,
                leases,
                waits,
                children,
                effects,
                definitions,
                events,
                recovery,
                virtual_users,
                retention,
                pool,
                sweeps,
                guard,
                ticks,
                dispatch,
                hooks,
            ]
        );
    };
    ($suite:ident, $factory:expr, [$($family:ident),+ $(,)?] $(,)?) => {
        #[allow(clippy::wildcard_imports)]
        mod $suite {
            #[allow(unused_imports)]
            use super::*;

            $crate::__suite_families! { [$($family)+] [] no $factory }
        }
    };
}

/// Takes `hooks` out of a suite's families, noting whether it was there
/// (`yes` or `no`), then expands every other family.
#[doc(hidden)]
#[macro_export]
macro_rules! __suite_families {
    ([hooks $($rest:ident)*] [$($seen:ident)*] $hooks:ident $factory:expr) => {
        $crate::__suite_families! { [$($rest)*] [$($seen)*] yes $factory }
    };
    ([$family:ident $($rest:ident)*] [$($seen:ident)*] $hooks:ident $factory:expr) => {
        $crate::__suite_families! { [$($rest)*] [$($seen)* $family] $hooks $factory }
    };
    ([] [$($family:ident)*] $hooks:ident $factory:expr) => {
        $( $crate::__family! { $family stamp $hooks $factory } )*
    };
}

/// Expands one family's list: `stamp` into a module of tests (its hook
/// cases too if the suite lists `hooks`), `names` into its cases as
/// `folder::group::case`.
#[doc(hidden)]
#[macro_export]
macro_rules! __expand_family {
    // The factory is awaited in one function per family, whose opaque
    // return type carries the family's bound: a factory without the
    // family's ports is one error there, not one per case.
    (
        [stamp $hooks:ident $factory:expr] $family:ident $folder:ident [$($bound:tt)+]
        cases { $($group:ident { $($case:ident,)* })* }
        hooked { $($hooked:tt)* }
    ) => {
        #[allow(clippy::wildcard_imports)]
        mod $family {
            #[allow(unused_imports)]
            use super::*;

            /// A fresh harness from the suite's factory.
            fn __harness() -> impl ::core::future::Future<Output = impl $($bound)+> {
                $factory
            }

            $crate::__stamp_groups! { $folder $($group { $($case,)* })* }
            $crate::__stamp_hooked! { $hooks $factory, $folder, [$($bound)+] $($hooked)* }
        }
    };
    (
        [names] $family:ident $folder:ident [$($bound:tt)+]
        cases { $($group:ident { $($case:ident,)* })* }
        hooked { $($hgroup:ident { $($hcase:ident,)* })* }
    ) => {
        &[
            $($(::core::concat!(
                ::core::stringify!($folder), "::", ::core::stringify!($group), "::",
                ::core::stringify!($case)
            ),)*)*
            $($(::core::concat!(
                ::core::stringify!($folder), "::", ::core::stringify!($hgroup), "::",
                ::core::stringify!($hcase)
            ),)*)*
        ]
    };
}

/// A family's hook cases, in a `hooks` module whose factory also needs
/// [`Hooks`](crate::Hooks): stamped only if the suite lists `hooks`.
#[doc(hidden)]
#[macro_export]
macro_rules! __stamp_hooked {
    ($hooks:ident $factory:expr, $folder:ident, [$($bound:tt)+]) => {};
    (no $factory:expr, $folder:ident, [$($bound:tt)+] $($hooked:tt)*) => {};
    (yes $factory:expr, $folder:ident, [$($bound:tt)+] $($group:ident { $($case:ident,)* })*) => {
        #[allow(clippy::wildcard_imports)]
        mod hooks {
            #[allow(unused_imports)]
            use super::*;

            /// A fresh harness from the suite's factory, with its hooks.
            fn __harness(
            ) -> impl ::core::future::Future<Output = impl $($bound)+ + $crate::Hooks> {
                $factory
            }

            $crate::__stamp_groups! { $folder $($group { $($case,)* })* }
        }
    };
}

/// One module of tests per group, each test running its case on a harness
/// from the enclosing module's `__harness`.
#[doc(hidden)]
#[macro_export]
macro_rules! __stamp_groups {
    ($folder:ident $($group:ident { $($case:ident,)* })*) => {
        $(
            #[allow(clippy::wildcard_imports)]
            mod $group {
                #[allow(unused_imports)]
                use super::*;
                $(
                    #[$crate::__private::tokio::test(
                        flavor = "multi_thread",
                        worker_threads = 4,
                        crate = "::flowstate_testkit::__private::tokio"
                    )]
                    async fn $case() {
                        let harness = super::__harness().await;
                        $crate::cases::$folder::$group::$case(&harness).await;
                        $crate::Harness::teardown(harness).await;
                    }
                )*
            }
        )*
    };
}
