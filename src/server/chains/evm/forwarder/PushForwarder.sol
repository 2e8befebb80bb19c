// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

/// One payment's deposit address (docs/push-payments.md): holds what a buyer pushed until its factory
/// sweeps it to the collection address. No constructor arguments, so every forwarder has the same
/// creation code and its address depends only on the factory and the salt (the payment).
contract PushForwarder {
    using SafeERC20 for IERC20;

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
}

/// Deploys a payment's forwarder at its counterfactual address (CREATE2, salt from the payment id) and
/// sweeps it, in one transaction sent by the owner (the service's executor); the buyer pays only for
/// the transfer into the deposit address.
contract PushForwarderFactory {
    address public immutable owner;
    bytes32 private constant forwarderCodeHash = keccak256(type(PushForwarder).creationCode);

    constructor(address owner_) {
        owner = owner_;
    }

    function depositAddress(bytes32 salt) public view returns (address) {
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), salt, forwarderCodeHash)))));
    }

    /// Deploys the forwarder of `salt` when it has no code yet, then sweeps its `token` to `to`.
    function sweep(bytes32 salt, IERC20 token, address to) external returns (uint256) {
        require(msg.sender == owner, "PushForwarderFactory: not the owner");
        address forwarder = depositAddress(salt);
        if (forwarder.code.length == 0) new PushForwarder{salt: salt}();
        return PushForwarder(forwarder).sweep(token, to);
    }
}
