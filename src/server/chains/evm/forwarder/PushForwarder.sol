// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {Clones} from "@openzeppelin/contracts/proxy/Clones.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

/// The code behind every payment's deposit address (docs/push-payments.md): each deposit address is an
/// EIP-1167 minimal proxy of the one PushForwarder its factory deploys, so deploying one costs a 45-byte
/// clone, and its address depends only on the factory and the salt (the payment). A forwarder holds what
/// a buyer pushed until the factory sweeps it to the collection address. It has no payable function:
/// native ETH sent to a deployed forwarder is refused (the sender keeps it); ETH that reached the address
/// before the forwarder existed is moved by `sweepNative`.
contract PushForwarder {
    using SafeERC20 for IERC20;

    /// Immutable, so part of the code every clone runs by delegatecall.
    address private immutable factory;

    constructor() {
        factory = msg.sender;
    }

    /// Sends the forwarder's whole balance of `token` to `to`; only its factory may ask.
    function sweep(IERC20 token, address to) external returns (uint256 amount) {
        require(msg.sender == factory, "PushForwarder: not the factory");
        amount = token.balanceOf(address(this));
        if (amount > 0) token.safeTransfer(to, amount);
    }

    /// Sends the forwarder's whole native balance to `to`; only its factory may ask.
    function sweepNative(address payable to) external returns (uint256 amount) {
        require(msg.sender == factory, "PushForwarder: not the factory");
        amount = address(this).balance;
        if (amount > 0) {
            (bool sent, ) = to.call{value: amount}("");
            require(sent, "PushForwarder: native transfer refused");
        }
    }
}

/// Deploys a payment's forwarder at its counterfactual address (a CREATE2 clone, salt from the payment
/// id) and sweeps it, in one transaction sent by the owner (the service's executor); the buyer pays only
/// for the transfer into the deposit address.
contract PushForwarderFactory {
    address public immutable owner;
    /// The factory's first contract (CREATE, nonce 1): its address follows from the factory's.
    address public immutable implementation;

    /// A native sweep leaves no Transfer log: this says how much moved, and where.
    event NativeSwept(bytes32 indexed salt, address indexed to, uint256 amount);

    constructor(address owner_) {
        owner = owner_;
        implementation = address(new PushForwarder());
    }

    function depositAddress(bytes32 salt) public view returns (address) {
        return Clones.predictDeterministicAddress(implementation, salt);
    }

    /// Deploys the forwarder of `salt` when it has no code yet, then sweeps its `token` to `to`.
    function sweep(bytes32 salt, IERC20 token, address to) external returns (uint256) {
        return PushForwarder(forwarderOf(salt)).sweep(token, to);
    }

    /// Deploys the forwarder of `salt` when it has no code yet, then sends its native balance to `to`.
    function sweepNative(bytes32 salt, address payable to) external returns (uint256 amount) {
        amount = PushForwarder(forwarderOf(salt)).sweepNative(to);
        emit NativeSwept(salt, to, amount);
    }

    /// The forwarder of `salt`, created when it has no code yet; only the owner may ask.
    function forwarderOf(bytes32 salt) private returns (address forwarder) {
        require(msg.sender == owner, "PushForwarderFactory: not the owner");
        forwarder = depositAddress(salt);
        if (forwarder.code.length == 0) Clones.cloneDeterministic(implementation, salt);
    }
}
